/*
 * Compute throttle for cuLaunchKernel, driven by CUDA_DEVICE_SM_LIMIT[_<i>] (percent).
 *
 * Duty cycle per process and device: launches run freely for limit% of a window (default 50 ms,
 * VCORE_SM_WINDOW_MS) or until VCORE_SM_MAX_QUEUED launches (default 64) are queued; the next
 * launch waits for the device to drain (cuCtxSynchronize), measures how long the work really took
 * since the window began, and sleeps so that this time is limit% of the elapsed time. This bounds this process's share of device time, not SM occupancy,
 * and knows nothing of other processes' work; it has only been measured against the fake runtime,
 * whose kernels take a configured time. VCORE_SM_THROTTLE=0 turns it off.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vendor_api.h>

#include "vcore.h"

struct dev_window {
    pthread_mutex_t mu;
    uint64_t start_ns;
    unsigned queued; /* launches since the last drain */
};

static struct dev_window windows[VC_MAX_DEV];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static uint64_t window_ns = 50ULL * 1000 * 1000;
static int enabled = 1;
static unsigned max_queued = 64;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void setup(void)
{
    for (int i = 0; i < VC_MAX_DEV; i++)
        pthread_mutex_init(&windows[i].mu, NULL);
    const char *w = getenv("VCORE_SM_WINDOW_MS");
    if (w != NULL && atoi(w) > 0)
        window_ns = (uint64_t)atoi(w) * 1000000ULL;
    const char *q = getenv("VCORE_SM_MAX_QUEUED");
    if (q != NULL && atoi(q) > 0)
        max_queued = (unsigned)atoi(q);
    const char *on = getenv("VCORE_SM_THROTTLE");
    enabled = on == NULL || strcmp(on, "0") != 0;
}

typedef CUresult (*sync_fn)(void);

void vc_throttle_before_launch(int dev)
{
    if (dev < 0 || dev >= VC_MAX_DEV)
        return;
    int limit = vc_cuda.sm_limit[dev];
    if (limit <= 0 || limit >= 100)
        return;
    pthread_once(&once, setup);
    if (!enabled)
        return;
    struct dev_window *win = &windows[dev];
    pthread_mutex_lock(&win->mu);
    uint64_t now = now_ns();
    if (win->start_ns == 0)
        win->start_ns = now;
    /* Launches return at once and queue on the device, so a burst is drained after max_queued
     * launches as well: the drain is what reveals how long the queued work really takes. */
    if (now - win->start_ns >= window_ns * (uint64_t)limit / 100 || ++win->queued > max_queued) {
        sync_fn sync = VC_REAL_T(VC_LIB_CUDA, sync_fn, "cuCtxSynchronize");
        if (sync != NULL)
            sync();
        uint64_t busy = now_ns() - win->start_ns;
        uint64_t idle = busy * (uint64_t)(100 - limit) / (uint64_t)limit;
        struct timespec ts = {(time_t)(idle / 1000000000ULL), (long)(idle % 1000000000ULL)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        win->start_ns = now_ns();
        win->queued = 1;
    }
    pthread_mutex_unlock(&win->mu);
}
