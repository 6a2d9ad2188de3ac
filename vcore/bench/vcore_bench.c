/*
 * ns per cuMemAlloc_v2/cuMemFree_v2 pair against the fake runtime, in P processes at once.
 *   vcore-bench ITERATIONS PROCS [SIZE_MIB]
 * Prints one "proc" line per process and a "result" line. Run with and without the library
 * preloaded to get the overhead; processes start together (pipe barrier) so they contend.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <vendor_api.h>

CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);

static double clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Wall-clock and CPU-time ns per pair: CPU time leaves out time spent descheduled, so it stays
 * meaningful on a loaded machine; wall time includes waiting for the lock under contention. */
struct timing {
    double wall, cpu;
};

static struct timing run(long iterations, size_t size)
{
    struct timing failed = {-1, -1};
    CUdevice d;
    CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuCtxCreate_v2(&c, 0, d))
        return failed;
    CUdeviceptr p;
    for (long i = 0; i < iterations / 10 + 1; i++) { /* warm up: resolve, register, fault in */
        if (cuMemAlloc_v2(&p, size) != CUDA_SUCCESS)
            return failed;
        cuMemFree_v2(p);
    }
    double w0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < iterations; i++) {
        if (cuMemAlloc_v2(&p, size) != CUDA_SUCCESS)
            return failed;
        cuMemFree_v2(p);
    }
    struct timing t = {(clock_ns(CLOCK_MONOTONIC) - w0) / (double)iterations,
                       (clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / (double)iterations};
    return t;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: vcore-bench ITERATIONS PROCS [SIZE_MIB]\n");
        return 2;
    }
    long iterations = atol(argv[1]);
    int procs = atoi(argv[2]);
    size_t size = (size_t)(argc > 3 ? atol(argv[3]) : 1) << 20;
    int go[2], out[2];
    if (pipe(go) != 0 || pipe(out) != 0)
        return 1;
    for (int i = 0; i < procs; i++) {
        if (fork() == 0) {
            close(go[1]);
            char b;
            if (read(go[0], &b, 1) < 0)
                _exit(1);
            struct timing t = run(iterations, size);
            if (write(out[1], &t, sizeof t) != sizeof t)
                _exit(1);
            _exit(t.wall < 0);
        }
    }
    close(go[0]);
    close(go[1]); /* start everyone */
    close(out[1]);
    double sum = 0, max = 0, cpu_sum = 0;
    int got = 0, failed = 0;
    struct timing t;
    while (read(out[0], &t, sizeof t) == sizeof t) {
        if (t.wall < 0) {
            failed++;
            continue;
        }
        printf("proc ns_per_pair=%.1f cpu_ns_per_pair=%.1f\n", t.wall, t.cpu);
        sum += t.wall;
        cpu_sum += t.cpu;
        max = t.wall > max ? t.wall : max;
        got++;
    }
    int status;
    while (wait(&status) > 0)
        ;
    printf("result procs=%d iterations=%ld failed=%d ns_per_pair_mean=%.1f ns_per_pair_max=%.1f "
           "cpu_ns_per_pair_mean=%.1f\n",
           procs, iterations, failed, got ? sum / got : -1.0, max, got ? cpu_sum / got : -1.0);
    return failed != 0 || got != procs;
}
