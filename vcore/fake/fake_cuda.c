/*
 * A fake libcuda.so.1 for tests and benchmarks: the driver entry points vcore touches, with
 * allocations tracked in host memory and no device. Kernels "run" for VCORE_FAKE_KERNEL_US
 * microseconds of simulated device time (default 0) so the launch throttle can be exercised.
 * Built with -Bsymbolic so its own cuGetProcAddress returns its own functions, as the real driver
 * does.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vendor_api.h>

#include "fake_alloc.h"

#define FAKE_EXPORT __attribute__((visibility("default")))
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_INVALID_DEVICE 101

static __thread int current_dev = -1;
static pthread_mutex_t gpu_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t gpu_free_at_ns, gpu_busy_ns;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static CUresult alloc_on(int dev, CUdeviceptr *dptr, size_t size)
{
    if (dptr == NULL || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t addr;
    int rc = fake_alloc(dev, size, &addr);
    if (rc != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *dptr = addr;
    return CUDA_SUCCESS;
}

static int dev_now(void) { return current_dev < 0 ? 0 : current_dev; }

FAKE_EXPORT CUresult cuInit(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
FAKE_EXPORT CUresult cuDriverGetVersion(int *v)
{
    if (v == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *v = 12040;
    return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetCount(int *n)
{
    if (n == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *n = fake_device_count();
    return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (dev == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= fake_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev)
{
    (void)flags;
    if (ctx == NULL || dev < 0 || dev >= fake_device_count())
        return CUDA_ERROR_INVALID_VALUE;
    *ctx = (CUcontext)(uintptr_t)(dev + 1);
    current_dev = dev;
    return CUDA_SUCCESS;
}
/* cuCtxCreate_v3 (CUDA 11.4): execution-affinity parameters before the flags. What the driver answers
 * cuGetProcAddress("cuCtxCreate") with from version 11040 on, so a caller that asks for that base name
 * with a newer version and calls it with three arguments fails, as it does on a real driver. */
FAKE_EXPORT CUresult cuCtxCreate_v3(CUcontext *ctx, const void *params, int num_params, unsigned int flags,
                                    CUdevice dev)
{
    if (num_params < 0 || (num_params > 0 && params == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= fake_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    return cuCtxCreate_v2(ctx, flags, dev);
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    if (ctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= fake_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *ctx = (CUcontext)(uintptr_t)(dev + 1);
    return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    current_dev = ctx == NULL ? -1 : (int)(uintptr_t)ctx - 1;
    return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
    if (dev == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (current_dev < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = current_dev;
    return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxSynchronize(void)
{
    pthread_mutex_lock(&gpu_mu);
    uint64_t until = gpu_free_at_ns;
    pthread_mutex_unlock(&gpu_mu);
    uint64_t now = now_ns();
    if (until > now) {
        uint64_t d = until - now;
        struct timespec ts = {(time_t)(d / 1000000000ULL), (long)(d % 1000000000ULL)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    if (bytes == NULL || dev < 0 || dev >= fake_device_count())
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = (size_t)fake_total_bytes();
    return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    if (free_bytes == NULL || total_bytes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t total = fake_total_bytes(), used = fake_used_on(dev_now());
    *total_bytes = (size_t)total;
    *free_bytes = (size_t)(used < total ? total - used : 0);
    return CUDA_SUCCESS;
}
/* The legacy 32-bit entry point: present, but unusable on a 64-bit process (as on real drivers). */
FAKE_EXPORT CUresult cuMemAlloc(unsigned int *dptr, unsigned int size)
{
    (void)dptr;
    (void)size;
    return CUDA_ERROR_NOT_SUPPORTED;
}
FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) { return alloc_on(dev_now(), dptr, size); }
FAKE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
    (void)flags;
    return alloc_on(dev_now(), dptr, size);
}
FAKE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s)
{
    (void)s;
    return alloc_on(dev_now(), dptr, size);
}
FAKE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s)
{
    (void)s;
    return alloc_on(dev_now(), dptr, size);
}
FAKE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, void *pool, CUstream s)
{
    (void)pool, (void)s;
    return alloc_on(dev_now(), dptr, size);
}
FAKE_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size, void *pool, CUstream s)
{
    (void)pool, (void)s;
    return alloc_on(dev_now(), dptr, size);
}
FAKE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                        unsigned int element_size)
{
    (void)element_size;
    if (pitch == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (width + 511) & ~(size_t)511;
    CUresult rc = alloc_on(dev_now(), dptr, p * height);
    if (rc == CUDA_SUCCESS)
        *pitch = p;
    return rc;
}
FAKE_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t size)
{
    if (pp == NULL || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    *pp = malloc(size);
    return *pp ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
FAKE_EXPORT CUresult cuMemFreeHost(void *p)
{
    free(p);
    return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    return fake_release(dptr) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
FAKE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
    (void)s;
    return cuMemFree_v2(dptr);
}
FAKE_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
    (void)s;
    return cuMemFree_v2(dptr);
}
FAKE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                                 unsigned long long flags)
{
    (void)flags;
    if (handle == NULL || prop == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr addr;
    CUresult rc = alloc_on(prop->location.id, &addr, size);
    if (rc == CUDA_SUCCESS)
        *handle = addr;
    return rc;
}
FAKE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) { return cuMemFree_v2(handle); }

static CUresult launch(void)
{
    const char *env = getenv("VCORE_FAKE_KERNEL_US");
    uint64_t k = env != NULL ? strtoull(env, NULL, 10) * 1000ULL : 0;
    pthread_mutex_lock(&gpu_mu);
    uint64_t now = now_ns();
    gpu_free_at_ns = (gpu_free_at_ns > now ? gpu_free_at_ns : now) + k;
    gpu_busy_ns += k;
    pthread_mutex_unlock(&gpu_mu);
    return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned shmem, CUstream s, void **params, void **extra)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem, (void)s, (void)params,
        (void)extra;
    return launch();
}
FAKE_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                         unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                                         void **extra)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}
FAKE_EXPORT CUresult cuLaunchKernelEx(const void *config, CUfunction f, void **params, void **extra)
{
    (void)config, (void)f, (void)params, (void)extra;
    return launch();
}
FAKE_EXPORT CUresult cuLaunchKernelEx_ptsz(const void *config, CUfunction f, void **params, void **extra)
{
    return cuLaunchKernelEx(config, f, params, extra);
}
/* Test-only: simulated device time consumed by launches so far. */
FAKE_EXPORT unsigned long long fakeCudaBusyNs(void)
{
    pthread_mutex_lock(&gpu_mu);
    unsigned long long b = gpu_busy_ns;
    pthread_mutex_unlock(&gpu_mu);
    return b;
}

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *status);

/* What the driver answers for base name + version: the newest variant not newer than the caller. */
static const struct {
    const char *base;
    int since;
    void *fn;
    void *ptsz;
} table[] = {
    {"cuInit", 2000, (void *)cuInit, NULL},
    {"cuDriverGetVersion", 2020, (void *)cuDriverGetVersion, NULL},
    {"cuDeviceGetCount", 2000, (void *)cuDeviceGetCount, NULL},
    {"cuDeviceGet", 2000, (void *)cuDeviceGet, NULL},
    {"cuCtxCreate", 11040, (void *)cuCtxCreate_v3, NULL},
    {"cuCtxCreate", 3020, (void *)cuCtxCreate_v2, NULL},
    {"cuDevicePrimaryCtxRetain", 7000, (void *)cuDevicePrimaryCtxRetain, NULL},
    {"cuCtxSetCurrent", 4000, (void *)cuCtxSetCurrent, NULL},
    {"cuCtxGetDevice", 2000, (void *)cuCtxGetDevice, NULL},
    {"cuCtxSynchronize", 2000, (void *)cuCtxSynchronize, NULL},
    {"cuDeviceTotalMem", 3020, (void *)cuDeviceTotalMem_v2, NULL},
    {"cuMemGetInfo", 3020, (void *)cuMemGetInfo_v2, NULL},
    {"cuMemAlloc", 3020, (void *)cuMemAlloc_v2, NULL},
    {"cuMemAlloc", 2000, (void *)cuMemAlloc, NULL},
    {"cuMemAllocManaged", 6000, (void *)cuMemAllocManaged, NULL},
    {"cuMemAllocAsync", 11020, (void *)cuMemAllocAsync, (void *)cuMemAllocAsync_ptsz},
    {"cuMemAllocFromPoolAsync", 11020, (void *)cuMemAllocFromPoolAsync, (void *)cuMemAllocFromPoolAsync_ptsz},
    {"cuMemAllocPitch", 3020, (void *)cuMemAllocPitch_v2, NULL},
    {"cuMemAllocHost", 3020, (void *)cuMemAllocHost_v2, NULL},
    {"cuMemFreeHost", 2000, (void *)cuMemFreeHost, NULL},
    {"cuMemFree", 3020, (void *)cuMemFree_v2, NULL},
    {"cuMemFreeAsync", 11020, (void *)cuMemFreeAsync, (void *)cuMemFreeAsync_ptsz},
    {"cuMemCreate", 10020, (void *)cuMemCreate, NULL},
    {"cuMemRelease", 10020, (void *)cuMemRelease, NULL},
    {"cuLaunchKernel", 4000, (void *)cuLaunchKernel, (void *)cuLaunchKernel_ptsz},
    {"cuLaunchKernelEx", 11060, (void *)cuLaunchKernelEx, (void *)cuLaunchKernelEx_ptsz},
    {"cuGetProcAddress", 12000, (void *)cuGetProcAddress_v2, NULL},
};

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *status)
{
    if (symbol == NULL || pfn == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i].base, symbol) != 0 || version < table[i].since)
            continue;
        *pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && table[i].ptsz ? table[i].ptsz : table[i].fn;
        if (status != NULL)
            *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    *pfn = NULL;
    if (status != NULL)
        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}

FAKE_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
