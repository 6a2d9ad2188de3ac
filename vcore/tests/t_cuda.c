/*
 * CUDA memory entry points in one process, library preloaded, fake libcuda linked directly.
 *   t_cuda quota        CUDA_DEVICE_MEMORY_LIMIT_0=1024m: every entry point counts, info is virtual
 *   t_cuda passthrough  no limit: allocations and info are the fake runtime's own
 *   t_cuda hold MIB     allocate MIB, print "held", block until stdin closes (killed by the test)
 *   t_cuda fill STEP    allocate STEP MiB blocks until refused, print "filled_mib=N"
 *   t_cuda filldev DEV STEP  the same on device DEV (a context made current on it)
 *   t_cuda exec MIB     allocate MIB, then exec "t_cuda fill 100" in the same process (same pid)
 *   t_cuda fork MIB     allocate MIB, fork a child that fills in 100 MiB steps, check the parent's
 *                       share survived the child (limit 1024m)
 */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "cuda_api.h"

static void info(size_t *f, size_t *t) { CHECK_EQ(cuMemGetInfo_v2(f, t), CUDA_SUCCESS); }

static int quota(void)
{
    const size_t limit = 1024 * MiB;
    size_t f, t, total;
    info(&f, &t);
    CHECK_EQ(t, limit);
    CHECK_EQ(f, limit);
    CHECK_EQ(cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
    CHECK_EQ(total, limit);
    /* NULL arguments: an error code, no crash. */
    CHECK_EQ(cuMemGetInfo_v2(NULL, &t), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemGetInfo_v2(&f, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemGetInfo_v2(NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuDeviceTotalMem_v2(NULL, 0), CUDA_ERROR_INVALID_VALUE);

    CUdeviceptr p[4], extra;
    for (int i = 0; i < 4; i++)
        CHECK_EQ(cuMemAlloc_v2(&p[i], 256 * MiB), CUDA_SUCCESS);
    CHECK_EQ(cuMemAlloc_v2(&extra, 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(cuMemAllocManaged(&extra, MiB, 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(cuMemAllocAsync(&extra, MiB, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    info(&f, &t);
    CHECK_EQ(f, 0);
    CHECK_EQ(t, limit);
    /* Freeing an address nobody allocated changes nothing. */
    CHECK(cuMemFree_v2(0xdead0000ULL) != CUDA_SUCCESS);
    info(&f, &t);
    CHECK_EQ(f, 0);
    CHECK_EQ(cuMemFree_v2(p[0]), CUDA_SUCCESS);
    info(&f, &t);
    CHECK_EQ(f, 256 * MiB);
    /* Managed, async and pitched allocations count too. */
    CHECK_EQ(cuMemAllocManaged(&p[0], 128 * MiB, 1), CUDA_SUCCESS);
    CHECK_EQ(cuMemAllocAsync(&extra, 64 * MiB, NULL), CUDA_SUCCESS);
    info(&f, &t);
    CHECK_EQ(f, 64 * MiB);
    CHECK_EQ(cuMemFreeAsync(extra, NULL), CUDA_SUCCESS);
    CHECK_EQ(cuMemAllocFromPoolAsync(&extra, 129 * MiB, NULL, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(cuMemAllocFromPoolAsync(&extra, 128 * MiB, NULL, NULL), CUDA_SUCCESS);
    info(&f, &t);
    CHECK_EQ(f, 0);
    CHECK_EQ(cuMemFreeAsync(extra, NULL), CUDA_SUCCESS);
    size_t pitch = 0;
    CHECK_EQ(cuMemAllocPitch_v2(&extra, &pitch, 1000, 1024, 4), CUDA_SUCCESS);
    CHECK_EQ(pitch, 1024);
    info(&f, &t);
    CHECK_EQ(f, 127 * MiB);
    CUdeviceptr big;
    CHECK_EQ(cuMemAllocPitch_v2(&big, &pitch, 1 << 20, 200, 4), CUDA_ERROR_OUT_OF_MEMORY);
    info(&f, &t);
    CHECK_EQ(f, 127 * MiB);
    CHECK_EQ(cuMemFree_v2(extra), CUDA_SUCCESS);
    CHECK_EQ(cuMemFree_v2(p[0]), CUDA_SUCCESS);
    for (int i = 1; i < 4; i++)
        CHECK_EQ(cuMemFree_v2(p[i]), CUDA_SUCCESS);
    info(&f, &t);
    CHECK_EQ(f, limit);
    /* VMM: cuMemCreate reserves on the device the allocation names, cuMemRelease gives it back. */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = 1;
    prop.location.type = 1;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h1, h2;
    CHECK_EQ(cuMemCreate(&h1, 768 * MiB, &prop, 0), CUDA_SUCCESS);
    CHECK_EQ(cuMemCreate(&h2, 512 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    info(&f, &t);
    CHECK_EQ(f, 256 * MiB);
    CHECK_EQ(cuMemRelease(h1), CUDA_SUCCESS);
    CHECK_EQ(cuMemCreate(&h2, 1024 * MiB, &prop, 0), CUDA_SUCCESS);
    CHECK_EQ(cuMemRelease(h2), CUDA_SUCCESS);
    info(&f, &t);
    CHECK_EQ(f, limit);
    printf("ok\n");
    return 0;
}

static int passthrough(void)
{
    size_t f, t, total;
    info(&f, &t);
    CHECK_EQ(t, 21525 * MiB);
    CHECK_EQ(cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
    CHECK_EQ(total, 21525 * MiB);
    CUdeviceptr a, b;
    CHECK_EQ(cuMemAlloc_v2(&a, 20000 * MiB), CUDA_SUCCESS);
    CHECK_EQ(cuMemAlloc_v2(&b, 2000 * MiB), CUDA_ERROR_OUT_OF_MEMORY); /* the fake card is full */
    info(&f, &t);
    CHECK_EQ(f, 1525 * MiB);
    CHECK_EQ(cuMemGetInfo_v2(NULL, &t), CUDA_ERROR_INVALID_VALUE); /* the fake's own answer */
    CHECK_EQ(cuMemFree_v2(a), CUDA_SUCCESS);
    printf("ok\n");
    return 0;
}

static int hold(size_t mib)
{
    CUdeviceptr p;
    CHECK_EQ(cuMemAlloc_v2(&p, mib * MiB), CUDA_SUCCESS);
    printf("held\n");
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0)
        ;
    return 0;
}

static int fill(size_t step)
{
    CUdeviceptr p;
    size_t n = 0;
    while (n < 100000 && cuMemAlloc_v2(&p, step * MiB) == CUDA_SUCCESS)
        n++;
    size_t f, t;
    info(&f, &t);
    printf("filled_mib=%zu total_mib=%zu free_mib=%zu\n", n * step, t / MiB, f / MiB);
    return 0;
}

static int filldev(int dev, size_t step)
{
    CUdevice d;
    CUcontext ctx;
    CHECK_EQ(cuDeviceGet(&d, dev), CUDA_SUCCESS);
    CHECK_EQ(cuCtxCreate_v2(&ctx, 0, d), CUDA_SUCCESS);
    CUdeviceptr p;
    size_t n = 0;
    while (n < 100000 && cuMemAlloc_v2(&p, step * MiB) == CUDA_SUCCESS)
        n++;
    printf("filled_mib=%zu\n", n * step);
    return 0;
}

static int exec_fill(const char *self, size_t mib)
{
    CUdeviceptr p;
    CHECK_EQ(cuMemAlloc_v2(&p, mib * MiB), CUDA_SUCCESS);
    /* The new image's memory starts empty (the device freed the old image's context); its
     * accounting must too, although the pid and start time are the same. */
    execl(self, self, "fill", "100", (char *)NULL);
    return 1;
}

static int fork_fill(size_t mib)
{
    CUdeviceptr p;
    CHECK_EQ(cuMemAlloc_v2(&p, mib * MiB), CUDA_SUCCESS);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        CUdeviceptr q;
        size_t n = 0;
        while (cuMemAlloc_v2(&q, 100 * MiB) == CUDA_SUCCESS)
            n++;
        printf("child_filled_mib=%zu\n", n * 100);
        fflush(stdout);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
    size_t f, t;
    info(&f, &t);
    printf("parent_free_mib=%zu\n", f / MiB);
    CHECK_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
    info(&f, &t);
    CHECK_EQ(f, t);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_context();
    if (argc >= 2 && strcmp(argv[1], "quota") == 0)
        return quota();
    if (argc >= 2 && strcmp(argv[1], "passthrough") == 0)
        return passthrough();
    if (argc >= 3 && strcmp(argv[1], "hold") == 0)
        return hold(strtoull(argv[2], NULL, 10));
    if (argc >= 3 && strcmp(argv[1], "fill") == 0)
        return fill(strtoull(argv[2], NULL, 10));
    if (argc >= 4 && strcmp(argv[1], "filldev") == 0)
        return filldev(atoi(argv[2]), strtoull(argv[3], NULL, 10));
    if (argc >= 3 && strcmp(argv[1], "exec") == 0)
        return exec_fill(argv[0], strtoull(argv[2], NULL, 10));
    if (argc >= 3 && strcmp(argv[1], "fork") == 0)
        return fork_fill(strtoull(argv[2], NULL, 10));
    fprintf(stderr, "usage: t_cuda quota|passthrough|hold MIB|fill STEP_MIB|exec MIB|fork MIB\n");
    return 2;
}
