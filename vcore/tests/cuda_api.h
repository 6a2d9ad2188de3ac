/* The driver entry points the test programs call directly (linked against the fake libcuda). */
#ifndef VCORE_TEST_CUDA_API_H
#define VCORE_TEST_CUDA_API_H
#include <vendor_api.h>
CUresult cuInit(unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxSynchronize(void);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned int);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, void *, CUstream);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemCreate(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuDeviceTotalMem_v2(size_t *, CUdevice);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                        void **, void **);
CUresult cuLaunchKernelEx(const void *, CUfunction, void **, void **);
unsigned long long fakeCudaBusyNs(void);

static inline void test_context(void)
{
    CUdevice d;
    CUcontext c;
    if (cuInit(0) != 0 || cuDeviceGet(&d, 0) != 0 || cuCtxCreate_v2(&c, 0, d) != 0) {
        fprintf(stderr, "cannot set up a context on the fake runtime\n");
        exit(1);
    }
}
#endif
