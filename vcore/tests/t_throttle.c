/* Launch K kernels of VCORE_FAKE_KERNEL_US simulated device time each, then synchronise; print the
 * device busy time and the wall time so the caller can compare their ratio with the SM limit. */
#include <time.h>

#include "check.h"
#include "cuda_api.h"

static unsigned long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int k = argc > 1 ? atoi(argv[1]) : 100;
    test_context();
    unsigned long long t0 = now_ns();
    /* Alternate the two launch entry points: both go through the throttle. */
    for (int i = 0; i < k; i++)
        CHECK_EQ(i % 2 ? cuLaunchKernelEx(NULL, (CUfunction)1, NULL, NULL)
                       : cuLaunchKernel((CUfunction)1, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
                 CUDA_SUCCESS);
    CHECK_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    unsigned long long wall = now_ns() - t0;
    printf("kernels=%d busy_ns=%llu wall_ns=%llu\n", k, fakeCudaBusyNs(), wall);
    return 0;
}
