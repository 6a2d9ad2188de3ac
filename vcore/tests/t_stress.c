/*
 * Thread stress in one process: T threads allocate and free through every memory entry point at
 * once. A counter of bytes really held must never pass the quota (CUDA_DEVICE_MEMORY_LIMIT_0) and
 * the container must be empty at the end. Runs with the library preloaded, and linked into
 * ThreadSanitizer / AddressSanitizer builds (make sanitize).
 */
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "cuda_api.h"

static uint64_t limit_bytes, outstanding, max_outstanding;
static int iterations = 3000;

static void note(uint64_t size)
{
    uint64_t now = __atomic_add_fetch(&outstanding, size, __ATOMIC_SEQ_CST);
    uint64_t max = __atomic_load_n(&max_outstanding, __ATOMIC_SEQ_CST);
    while (now > max && !__atomic_compare_exchange_n(&max_outstanding, &max, now, 0, __ATOMIC_SEQ_CST,
                                                     __ATOMIC_SEQ_CST))
        ;
}

static void *run(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u;
    CUdevice d;
    CUcontext c;
    CHECK_EQ(cuDeviceGet(&d, 0), 0);
    CHECK_EQ(cuCtxCreate_v2(&c, 0, d), 0);
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = 1;
    prop.location.type = 1;
    /* Each thread keeps up to 4 allocations so threads overlap and the quota is contended. */
    struct held {
        int kind;
        uint64_t size;
        CUdeviceptr p;
        CUmemGenericAllocationHandle h;
    } held[4];
    int nh = 0;
    for (int i = 0; i < iterations; i++) {
        seed = seed * 1103515245u + 12345u;
        if (nh == 4 || (nh > 0 && (seed >> 24) % 2 == 0)) {
            struct held x = held[--nh];
            __atomic_sub_fetch(&outstanding, x.size, __ATOMIC_SEQ_CST);
            CUresult rc = x.kind == 0 ? cuMemFree_v2(x.p) : x.kind == 1 ? cuMemFreeAsync(x.p, NULL) : cuMemRelease(x.h);
            CHECK_EQ(rc, CUDA_SUCCESS);
            continue;
        }
        struct held x = {(int)((seed >> 20) % 3), (1 + (seed >> 12) % 32) * MiB, 0, 0};
        CUresult rc = x.kind == 0 ? cuMemAlloc_v2(&x.p, x.size)
                      : x.kind == 1 ? cuMemAllocAsync(&x.p, x.size, NULL)
                                    : cuMemCreate(&x.h, x.size, &prop, 0);
        if (rc != CUDA_SUCCESS) {
            CHECK_EQ(rc, CUDA_ERROR_OUT_OF_MEMORY);
            continue;
        }
        note(x.size);
        held[nh++] = x;
    }
    while (nh > 0) {
        struct held x = held[--nh];
        __atomic_sub_fetch(&outstanding, x.size, __ATOMIC_SEQ_CST);
        CUresult rc = x.kind == 0 ? cuMemFree_v2(x.p) : x.kind == 1 ? cuMemFreeAsync(x.p, NULL) : cuMemRelease(x.h);
        CHECK_EQ(rc, CUDA_SUCCESS);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 8;
    if (argc > 2)
        iterations = atoi(argv[2]);
    limit_bytes = 64 * MiB; /* matches CUDA_DEVICE_MEMORY_LIMIT_0=64m set by the caller */
    test_context();
    pthread_t tid[64];
    for (int i = 0; i < threads && i < 64; i++)
        CHECK(pthread_create(&tid[i], NULL, run, (void *)(uintptr_t)(i + 1)) == 0);
    for (int i = 0; i < threads && i < 64; i++)
        pthread_join(tid[i], NULL);
    size_t f, t;
    CHECK_EQ(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
    printf("threads=%d max_outstanding_mib=%.1f total_mib=%zu free_mib=%zu\n", threads,
           (double)max_outstanding / MiB, t / MiB, f / MiB);
    CHECK(max_outstanding <= limit_bytes);
    CHECK_EQ(t, limit_bytes);
    CHECK_EQ(f, limit_bytes);
    printf("ok\n");
    return 0;
}
