/*
 * The CUDA 12 runtime's path: dlopen("libcuda.so.1"), dlsym(handle, "cuGetProcAddress[_v2]"), then
 * base names + CUDA version. With a limit, the answers must be vcore's wrappers of exactly the
 * versioned function the driver returns, exact names only; without one (argv[1] == "passthrough"),
 * the driver's own functions. Linked without libcuda.
 */
#include <dlfcn.h>
#include <string.h>

#include "check.h"
#include <vendor_api.h>

typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t);

/* Which object and symbol a pointer belongs to. */
static int is_from(void *p, const char *object, const char *symbol)
{
    Dl_info di;
    if (p == NULL || dladdr(p, &di) == 0 || di.dli_fname == NULL || di.dli_sname == NULL)
        return 0;
    if (strstr(di.dli_fname, object) == NULL || strcmp(di.dli_sname, symbol) != 0) {
        fprintf(stderr, "  %p is %s in %s, expected %s in %s\n", p, di.dli_sname, di.dli_fname, symbol, object);
        return 0;
    }
    return 1;
}

static void *get(gpa2_fn gpa2, const char *name, int version, cuuint64_t flags, CUresult expect)
{
    void *p = (void *)1;
    CUdriverProcAddressQueryResult st = -1;
    CUresult rc = gpa2(name, &p, version, flags, &st);
    CHECK_EQ(rc, expect);
    if (expect != CUDA_SUCCESS)
        CHECK(p == NULL);
    return p;
}

int main(int argc, char **argv)
{
    int limited = !(argc >= 2 && strcmp(argv[1], "passthrough") == 0);
    const char *W = limited ? "libvcore" : "libcuda"; /* where wrapped names must come from */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    gpa2_fn gpa2 = (gpa2_fn)dlsym(h, "cuGetProcAddress_v2");
    gpa_fn gpa = (gpa_fn)dlsym(h, "cuGetProcAddress");
    CHECK(is_from((void *)gpa2, W, "cuGetProcAddress_v2"));
    CHECK(is_from((void *)gpa, W, "cuGetProcAddress"));

    /* Base name + version -> the versioned function the driver would return, wrapped. */
    CHECK(is_from(get(gpa2, "cuMemAlloc", 12000, 0, 0), W, "cuMemAlloc_v2"));
    CHECK(is_from(get(gpa2, "cuMemAlloc", 3020, 0, 0), W, "cuMemAlloc_v2"));
    CHECK(is_from(get(gpa2, "cuMemAlloc", 3010, 0, 0), "libcuda", "cuMemAlloc"));
    CHECK(is_from(get(gpa2, "cuMemFree", 12000, 0, 0), W, "cuMemFree_v2"));
    CHECK(is_from(get(gpa2, "cuMemGetInfo", 12000, 0, 0), W, "cuMemGetInfo_v2"));
    CHECK(is_from(get(gpa2, "cuDeviceTotalMem", 12000, 0, 0), W, "cuDeviceTotalMem_v2"));
    CHECK(is_from(get(gpa2, "cuMemAllocPitch", 12000, 0, 0), W, "cuMemAllocPitch_v2"));
    CHECK(is_from(get(gpa2, "cuMemAllocManaged", 12000, 0, 0), W, "cuMemAllocManaged"));
    CHECK(is_from(get(gpa2, "cuMemCreate", 12000, 0, 0), W, "cuMemCreate"));
    CHECK(is_from(get(gpa2, "cuMemRelease", 12000, 0, 0), W, "cuMemRelease"));
    CHECK(is_from(get(gpa2, "cuMemAllocAsync", 12000, 0, 0), W, "cuMemAllocAsync"));
    CHECK(is_from(get(gpa2, "cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, 0), W,
                  "cuMemAllocAsync_ptsz"));
    CHECK(is_from(get(gpa2, "cuMemFreeAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, 0), W,
                  "cuMemFreeAsync_ptsz"));
    CHECK(is_from(get(gpa2, "cuMemAllocFromPoolAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, 0), W,
                  "cuMemAllocFromPoolAsync_ptsz"));
    CHECK(is_from(get(gpa2, "cuLaunchKernel", 12000, 0, 0), W, "cuLaunchKernel"));
    CHECK(is_from(get(gpa2, "cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, 0), W,
                  "cuLaunchKernel_ptsz"));
    CHECK(is_from(get(gpa2, "cuLaunchKernelEx", 12000, 0, 0), W, "cuLaunchKernelEx"));
    CHECK(is_from(get(gpa2, "cuGetProcAddress", 12000, 0, 0), W, "cuGetProcAddress_v2"));
    /* Names vcore does not wrap come back from the driver untouched. */
    CHECK(is_from(get(gpa2, "cuMemAllocHost", 12000, 0, 0), "libcuda", "cuMemAllocHost_v2"));
    CHECK(is_from(get(gpa2, "cuInit", 12000, 0, 0), "libcuda", "cuInit"));
    /* Exact names only: prefixes, extensions and other libraries' names are not matched. */
    get(gpa2, "cuMem", 12000, 0, CUDA_ERROR_NOT_FOUND);
    get(gpa2, "cuMemAllocX", 12000, 0, CUDA_ERROR_NOT_FOUND);
    get(gpa2, "cudnnCreate", 12000, 0, CUDA_ERROR_NOT_FOUND);
    CHECK(dlsym(h, "cuMemAlloc_v2x") == NULL);
    CHECK(dlsym(h, "cudnnCreate") == NULL);
    CHECK(is_from(dlsym(h, "cuMemAlloc"), "libcuda", "cuMemAlloc"));
    CHECK(is_from(dlsym(h, "cuMemAlloc_v2"), W, "cuMemAlloc_v2"));
    /* A wrapped name looked up on a library that lacks it stays NULL. */
    void *libm = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
    CHECK(libm != NULL && dlsym(libm, "cuMemAlloc_v2") == NULL);
    /* The old entry point resolves through the same table. */
    void *p = NULL;
    CHECK_EQ(gpa("cuMemAlloc", &p, 12000, 0), CUDA_SUCCESS);
    CHECK(is_from(p, W, "cuMemAlloc_v2"));
    /* RTLD_NEXT from this program searches the objects after it: libvcore's export is found. */
    if (limited)
        CHECK(is_from(dlsym(RTLD_NEXT, "cuMemAlloc_v2"), "libvcore", "cuMemAlloc_v2"));
    CHECK(dlsym(RTLD_NEXT, "getpid") != NULL);

    /* vcore leaves names it does not wrap to the driver. "cuCtxCreate" past 11040 is the five-argument
     * cuCtxCreate_v3 (what a probe calling it with three arguments met on an H200: error 101). */
    CHECK(is_from(get(gpa2, "cuCtxCreate", 12000, 0, 0), "libcuda", "cuCtxCreate_v3"));
    CHECK(is_from(get(gpa2, "cuCtxCreate", 11030, 0, 0), "libcuda", "cuCtxCreate_v2"));

    /* The functions obtained this way enforce the quota (limit 1024m) and report it. */
    CUresult (*init)(unsigned) = get(gpa2, "cuInit", 12000, 0, 0);
    CUresult (*dev_get)(CUdevice *, int) = get(gpa2, "cuDeviceGet", 12000, 0, 0);
    CUresult (*primary_retain)(CUcontext *, CUdevice) = get(gpa2, "cuDevicePrimaryCtxRetain", 12000, 0, 0);
    CUresult (*set_current)(CUcontext) = get(gpa2, "cuCtxSetCurrent", 12000, 0, 0);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t) = get(gpa2, "cuMemAlloc", 12000, 0, 0);
    CUresult (*mem_free)(CUdeviceptr) = get(gpa2, "cuMemFree", 12000, 0, 0);
    CUresult (*mem_info)(size_t *, size_t *) = get(gpa2, "cuMemGetInfo", 12000, 0, 0);
    CUdevice d;
    CUcontext c;
    CHECK_EQ(init(0), 0);
    CHECK_EQ(dev_get(&d, 0), 0);
    CHECK_EQ(primary_retain(&c, d), 0);
    CHECK_EQ(set_current(c), 0);
    CUdeviceptr a, b;
    size_t f, t;
    CHECK_EQ(mem_alloc(&a, 1000 * MiB), CUDA_SUCCESS);
    CHECK_EQ(mem_alloc(&b, 100 * MiB), limited ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS);
    CHECK_EQ(mem_info(&f, &t), CUDA_SUCCESS);
    if (limited) {
        CHECK_EQ(t, 1024 * MiB);
        CHECK_EQ(f, 24 * MiB);
    } else {
        CHECK_EQ(t, 21525 * MiB);
        CHECK_EQ(mem_free(b), CUDA_SUCCESS);
    }
    CHECK_EQ(mem_free(a), CUDA_SUCCESS);
    printf("ok\n");
    return 0;
}
