/*
 * CUDA driver API wrappers: memory entry points reserve before they allocate and release on free;
 * memory info is rewritten to the container's quota; cuGetProcAddress hands out the wrapper of the
 * exact versioned function the driver would return; cuLaunchKernel passes through the throttle.
 */
#include <string.h>

#include <vendor_api.h>

#include "vcore.h"

static struct vc_map dev_ptrs = VC_MAP_INIT;   /* CUdeviceptr -> size */
static struct vc_map vmm_handles = VC_MAP_INIT; /* CUmemGenericAllocationHandle -> size */

typedef CUresult (*ctx_get_device_fn)(CUdevice *);
typedef CUresult (*ctx_sync_fn)(void);

static int current_device(void)
{
    ctx_get_device_fn f = VC_REAL_T(VC_LIB_CUDA, ctx_get_device_fn, "cuCtxGetDevice");
    CUdevice dev = 0;
    if (f == NULL || f(&dev) != CUDA_SUCCESS)
        return 0; /* no current context: the runtime's default device */
    return dev;
}

/* Reserve, run the real allocation, undo the reservation if it failed. */
#define CHARGED_ALLOC(dev_expr, size_expr, call, key_expr, map)            \
    do {                                                                   \
        if (!vc_cuda.active || vc_disabled)                                \
            return call;                                                   \
        int dev_ = (dev_expr);                                             \
        uint64_t size_ = (size_expr);                                      \
        int c_ = vc_charge(&vc_cuda, dev_, size_);                         \
        if (c_ == VC_DENIED)                                               \
            return CUDA_ERROR_OUT_OF_MEMORY;                               \
        CUresult rc_ = call;                                               \
        if (c_ == VC_CHARGED) {                                            \
            if (rc_ == CUDA_SUCCESS)                                       \
                vc_map_put(&(map), (uint64_t)(key_expr), size_, dev_);     \
            else                                                           \
                vc_uncharge(&vc_cuda, dev_, size_);                        \
        }                                                                  \
        return rc_;                                                        \
    } while (0)

/* Forget the allocation first (its address may be handed out again as soon as the real free
 * returns), run the real free, and put it back if the free failed. */
#define CHARGED_FREE(key_expr, call, map)                                  \
    do {                                                                   \
        uint64_t size_ = 0;                                                \
        int dev_ = 0;                                                      \
        int known_ = vc_map_take(&(map), (uint64_t)(key_expr), &size_, &dev_); \
        CUresult rc_ = call;                                               \
        if (known_) {                                                      \
            if (rc_ == CUDA_SUCCESS)                                       \
                vc_uncharge(&vc_cuda, dev_, size_);                        \
            else                                                           \
                vc_map_put(&(map), (uint64_t)(key_expr), size_, dev_);     \
        }                                                                  \
        return rc_;                                                        \
    } while (0)

VC_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr);

#define NEED(f) \
    if ((f) == NULL) \
        return CUDA_ERROR_NOT_INITIALIZED

VC_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    __typeof__(&cuMemAlloc_v2) f = VC_REAL(VC_LIB_CUDA, cuMemAlloc_v2);
    NEED(f);
    if (dptr == NULL || bytesize == 0)
        return f(dptr, bytesize);
    CHARGED_ALLOC(current_device(), bytesize, f(dptr, bytesize), *dptr, dev_ptrs);
}

VC_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    __typeof__(&cuMemAllocManaged) f = VC_REAL(VC_LIB_CUDA, cuMemAllocManaged);
    NEED(f);
    if (dptr == NULL || bytesize == 0)
        return f(dptr, bytesize, flags);
    CHARGED_ALLOC(current_device(), bytesize, f(dptr, bytesize, flags), *dptr, dev_ptrs);
}

VC_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    __typeof__(&cuMemAllocAsync) f = VC_REAL(VC_LIB_CUDA, cuMemAllocAsync);
    NEED(f);
    if (dptr == NULL || bytesize == 0)
        return f(dptr, bytesize, stream);
    CHARGED_ALLOC(current_device(), bytesize, f(dptr, bytesize, stream), *dptr, dev_ptrs);
}

VC_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    __typeof__(&cuMemAllocAsync_ptsz) f = VC_REAL(VC_LIB_CUDA, cuMemAllocAsync_ptsz);
    NEED(f);
    if (dptr == NULL || bytesize == 0)
        return f(dptr, bytesize, stream);
    CHARGED_ALLOC(current_device(), bytesize, f(dptr, bytesize, stream), *dptr, dev_ptrs);
}

typedef struct CUmemPoolHandle_st *CUmemoryPool;

VC_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream)
{
    __typeof__(&cuMemAllocFromPoolAsync) f = VC_REAL(VC_LIB_CUDA, cuMemAllocFromPoolAsync);
    NEED(f);
    if (dptr == NULL || bytesize == 0)
        return f(dptr, bytesize, pool, stream);
    CHARGED_ALLOC(current_device(), bytesize, f(dptr, bytesize, pool, stream), *dptr, dev_ptrs);
}

VC_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                CUstream stream)
{
    __typeof__(&cuMemAllocFromPoolAsync_ptsz) f = VC_REAL(VC_LIB_CUDA, cuMemAllocFromPoolAsync_ptsz);
    NEED(f);
    if (dptr == NULL || bytesize == 0)
        return f(dptr, bytesize, pool, stream);
    CHARGED_ALLOC(current_device(), bytesize, f(dptr, bytesize, pool, stream), *dptr, dev_ptrs);
}

VC_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                      unsigned int element_size)
{
    __typeof__(&cuMemAllocPitch_v2) f = VC_REAL(VC_LIB_CUDA, cuMemAllocPitch_v2);
    NEED(f);
    if (!vc_cuda.active || vc_disabled || dptr == NULL || pitch == NULL || width == 0 || height == 0)
        return f(dptr, pitch, width, height, element_size);
    /* The pitch is known only afterwards: reserve with a 512-byte row alignment, then settle. */
    int dev = current_device();
    uint64_t guess = (uint64_t)((width + 511) & ~(size_t)511) * height;
    int c = vc_charge(&vc_cuda, dev, guess);
    if (c == VC_DENIED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = f(dptr, pitch, width, height, element_size);
    if (c != VC_CHARGED)
        return rc;
    if (rc != CUDA_SUCCESS) {
        vc_uncharge(&vc_cuda, dev, guess);
        return rc;
    }
    uint64_t actual = (uint64_t)*pitch * height;
    if (actual > guess && vc_charge(&vc_cuda, dev, actual - guess) == VC_DENIED) {
        __typeof__(&cuMemFree_v2) release = VC_REAL(VC_LIB_CUDA, cuMemFree_v2);
        if (release != NULL)
            release(*dptr);
        vc_uncharge(&vc_cuda, dev, guess);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (actual < guess)
        vc_uncharge(&vc_cuda, dev, guess - actual);
    vc_map_put(&dev_ptrs, (uint64_t)*dptr, actual, dev);
    return rc;
}

VC_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    __typeof__(&cuMemFree_v2) f = VC_REAL(VC_LIB_CUDA, cuMemFree_v2);
    NEED(f);
    if (dptr == 0)
        return f(dptr);
    CHARGED_FREE(dptr, f(dptr), dev_ptrs);
}

VC_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
    __typeof__(&cuMemFreeAsync) f = VC_REAL(VC_LIB_CUDA, cuMemFreeAsync);
    NEED(f);
    if (dptr == 0)
        return f(dptr, stream);
    CHARGED_FREE(dptr, f(dptr, stream), dev_ptrs);
}

VC_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
    __typeof__(&cuMemFreeAsync_ptsz) f = VC_REAL(VC_LIB_CUDA, cuMemFreeAsync_ptsz);
    NEED(f);
    if (dptr == 0)
        return f(dptr, stream);
    CHARGED_FREE(dptr, f(dptr, stream), dev_ptrs);
}

VC_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                               unsigned long long flags)
{
    __typeof__(&cuMemCreate) f = VC_REAL(VC_LIB_CUDA, cuMemCreate);
    NEED(f);
    if (handle == NULL || prop == NULL || size == 0)
        return f(handle, size, prop, flags);
    /* CU_MEM_LOCATION_TYPE_DEVICE = 1: the allocation names its device. */
    int dev = prop->location.type == 1 ? prop->location.id : current_device();
    CHARGED_ALLOC(dev, size, f(handle, size, prop, flags), *handle, vmm_handles);
}

VC_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    __typeof__(&cuMemRelease) f = VC_REAL(VC_LIB_CUDA, cuMemRelease);
    NEED(f);
    CHARGED_FREE(handle, f(handle), vmm_handles);
}

VC_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    __typeof__(&cuMemGetInfo_v2) f = VC_REAL(VC_LIB_CUDA, cuMemGetInfo_v2);
    NEED(f);
    if (!vc_cuda.active || vc_disabled)
        return f(free_bytes, total_bytes);
    if (free_bytes == NULL || total_bytes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    size_t rf = 0, rt = 0;
    CUresult rc = f(&rf, &rt);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t t = rt, fr = rf;
    vc_virtual_info(&vc_cuda, current_device(), rt, rf, &t, &fr, NULL);
    *free_bytes = (size_t)fr;
    *total_bytes = (size_t)t;
    return CUDA_SUCCESS;
}

VC_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    __typeof__(&cuDeviceTotalMem_v2) f = VC_REAL(VC_LIB_CUDA, cuDeviceTotalMem_v2);
    NEED(f);
    if (!vc_cuda.active || vc_disabled)
        return f(bytes, dev);
    if (bytes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    size_t real_total = 0;
    CUresult rc = f(&real_total, dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t t = real_total, fr = real_total;
    vc_virtual_info(&vc_cuda, dev, real_total, real_total, &t, &fr, NULL);
    *bytes = (size_t)t;
    return CUDA_SUCCESS;
}

VC_EXPORT CUresult cuLaunchKernel(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                  unsigned bz, unsigned shmem, CUstream stream, void **params, void **extra)
{
    __typeof__(&cuLaunchKernel) f = VC_REAL(VC_LIB_CUDA, cuLaunchKernel);
    NEED(f);
    if (vc_cuda.active && !vc_disabled)
        vc_throttle_before_launch(current_device());
    return f(fn, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

VC_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                       unsigned by, unsigned bz, unsigned shmem, CUstream stream, void **params,
                                       void **extra)
{
    __typeof__(&cuLaunchKernel_ptsz) f = VC_REAL(VC_LIB_CUDA, cuLaunchKernel_ptsz);
    NEED(f);
    if (vc_cuda.active && !vc_disabled)
        vc_throttle_before_launch(current_device());
    return f(fn, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

typedef struct CUlaunchConfig_st CUlaunchConfig;

VC_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction fn, void **params, void **extra)
{
    __typeof__(&cuLaunchKernelEx) f = VC_REAL(VC_LIB_CUDA, cuLaunchKernelEx);
    NEED(f);
    if (vc_cuda.active && !vc_disabled)
        vc_throttle_before_launch(current_device());
    return f(config, fn, params, extra);
}

VC_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction fn, void **params, void **extra)
{
    __typeof__(&cuLaunchKernelEx_ptsz) f = VC_REAL(VC_LIB_CUDA, cuLaunchKernelEx_ptsz);
    NEED(f);
    if (vc_cuda.active && !vc_disabled)
        vc_throttle_before_launch(current_device());
    return f(config, fn, params, extra);
}

VC_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags)
{
    __typeof__(&cuGetProcAddress) f = VC_REAL(VC_LIB_CUDA, cuGetProcAddress);
    NEED(f);
    CUresult rc = f(symbol, pfn, cuda_version, flags);
    if (rc == CUDA_SUCCESS && pfn != NULL && *pfn != NULL && vc_cuda.active && !vc_disabled) {
        void *w = vc_cuda_proc_hook(symbol, cuda_version, flags);
        if (w != NULL)
            *pfn = w;
    }
    return rc;
}

VC_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *status)
{
    __typeof__(&cuGetProcAddress_v2) f = VC_REAL(VC_LIB_CUDA, cuGetProcAddress_v2);
    NEED(f);
    CUresult rc = f(symbol, pfn, cuda_version, flags, status);
    if (rc == CUDA_SUCCESS && pfn != NULL && *pfn != NULL && vc_cuda.active && !vc_disabled) {
        void *w = vc_cuda_proc_hook(symbol, cuda_version, flags);
        if (w != NULL)
            *pfn = w;
    }
    return rc;
}

/* Exported names vcore wraps: what dlsym on the real library's handle is answered with. */
static const struct {
    const char *name;
    void *wrapper;
} exact[] = {
    {"cuMemAlloc_v2", (void *)cuMemAlloc_v2},
    {"cuMemAllocManaged", (void *)cuMemAllocManaged},
    {"cuMemAllocAsync", (void *)cuMemAllocAsync},
    {"cuMemAllocAsync_ptsz", (void *)cuMemAllocAsync_ptsz},
    {"cuMemAllocFromPoolAsync", (void *)cuMemAllocFromPoolAsync},
    {"cuMemAllocFromPoolAsync_ptsz", (void *)cuMemAllocFromPoolAsync_ptsz},
    {"cuMemAllocPitch_v2", (void *)cuMemAllocPitch_v2},
    {"cuMemFree_v2", (void *)cuMemFree_v2},
    {"cuMemFreeAsync", (void *)cuMemFreeAsync},
    {"cuMemFreeAsync_ptsz", (void *)cuMemFreeAsync_ptsz},
    {"cuMemCreate", (void *)cuMemCreate},
    {"cuMemRelease", (void *)cuMemRelease},
    {"cuMemGetInfo_v2", (void *)cuMemGetInfo_v2},
    {"cuDeviceTotalMem_v2", (void *)cuDeviceTotalMem_v2},
    {"cuLaunchKernel", (void *)cuLaunchKernel},
    {"cuLaunchKernel_ptsz", (void *)cuLaunchKernel_ptsz},
    {"cuLaunchKernelEx", (void *)cuLaunchKernelEx},
    {"cuLaunchKernelEx_ptsz", (void *)cuLaunchKernelEx_ptsz},
    {"cuGetProcAddress", (void *)cuGetProcAddress},
    {"cuGetProcAddress_v2", (void *)cuGetProcAddress_v2},
};

void *vc_cuda_hook(const char *name)
{
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcmp(exact[i].name, name) == 0)
            return exact[i].wrapper;
    return NULL;
}

/*
 * cuGetProcAddress requests: base name + the caller's CUDA version -> the versioned function the
 * driver returns for that version. Rows for one base name are ordered newest first; a request
 * older than every row is the unversioned legacy entry point, which vcore leaves alone.
 */
static const struct {
    const char *base;
    int since;          /* CUDA version (1000 * major + 10 * minor) the versioned name starts */
    void *wrapper;
    void *ptsz_wrapper; /* for CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */
} versions[] = {
    {"cuMemAlloc", 3020, (void *)cuMemAlloc_v2, NULL},
    {"cuMemAllocPitch", 3020, (void *)cuMemAllocPitch_v2, NULL},
    {"cuMemFree", 3020, (void *)cuMemFree_v2, NULL},
    {"cuMemGetInfo", 3020, (void *)cuMemGetInfo_v2, NULL},
    {"cuDeviceTotalMem", 3020, (void *)cuDeviceTotalMem_v2, NULL},
    {"cuMemAllocManaged", 6000, (void *)cuMemAllocManaged, NULL},
    {"cuLaunchKernel", 4000, (void *)cuLaunchKernel, (void *)cuLaunchKernel_ptsz},
    {"cuLaunchKernelEx", 11060, (void *)cuLaunchKernelEx, (void *)cuLaunchKernelEx_ptsz},
    {"cuMemCreate", 10020, (void *)cuMemCreate, NULL},
    {"cuMemRelease", 10020, (void *)cuMemRelease, NULL},
    {"cuMemAllocAsync", 11020, (void *)cuMemAllocAsync, (void *)cuMemAllocAsync_ptsz},
    {"cuMemFreeAsync", 11020, (void *)cuMemFreeAsync, (void *)cuMemFreeAsync_ptsz},
    {"cuMemAllocFromPoolAsync", 11020, (void *)cuMemAllocFromPoolAsync, (void *)cuMemAllocFromPoolAsync_ptsz},
    {"cuGetProcAddress", 12000, (void *)cuGetProcAddress_v2, NULL},
    {"cuGetProcAddress", 11030, (void *)cuGetProcAddress, NULL},
};

void *vc_cuda_proc_hook(const char *symbol, int cuda_version, unsigned long long flags)
{
    if (symbol == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        if (strcmp(versions[i].base, symbol) != 0 || cuda_version < versions[i].since)
            continue;
        if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && versions[i].ptsz_wrapper != NULL)
            return versions[i].ptsz_wrapper;
        return versions[i].wrapper;
    }
    /* A caller may also ask for a versioned name outright. */
    return vc_cuda_hook(symbol);
}

void vc_cuda_fork(int phase)
{
    struct vc_map *maps[] = {&dev_ptrs, &vmm_handles};
    for (int i = 0; i < 2; i++) {
        if (phase == VC_FORK_PREPARE)
            vc_map_fork_prepare(maps[i]);
        else if (phase == VC_FORK_PARENT)
            vc_map_fork_parent(maps[i]);
        else
            vc_map_fork_child(maps[i]);
    }
}
