/* NVML through dlopen + dlsym (as pynvml does): memory info virtualised to the quota (1024m),
 * "used" = what this container holds, NULL arguments refused without a crash. */
#include <dlfcn.h>
#include <string.h>

#include "check.h"
#include <vendor_api.h>

int main(void)
{
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *nv = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(cu != NULL && nv != NULL);
    CUresult (*init)(unsigned) = dlsym(cu, "cuInit");
    CUresult (*mem_alloc)(CUdeviceptr *, size_t) = dlsym(cu, "cuMemAlloc_v2");
    nvmlReturn_t (*nvinit)(void) = dlsym(nv, "nvmlInit_v2");
    nvmlReturn_t (*by_index)(unsigned, nvmlDevice_t *) = dlsym(nv, "nvmlDeviceGetHandleByIndex_v2");
    nvmlReturn_t (*info)(nvmlDevice_t, nvmlMemory_t *) = dlsym(nv, "nvmlDeviceGetMemoryInfo");
    nvmlReturn_t (*info2)(nvmlDevice_t, nvmlMemory_v2_t *) = dlsym(nv, "nvmlDeviceGetMemoryInfo_v2");
    CHECK(init && mem_alloc && nvinit && by_index && info && info2);
    Dl_info di;
    CHECK(dladdr((void *)info, &di) && strstr(di.dli_fname, "libvcore") != NULL);
    CHECK_EQ(init(0), 0);
    CUdeviceptr p;
    CHECK_EQ(mem_alloc(&p, 300 * MiB), CUDA_SUCCESS);
    CHECK_EQ(nvinit(), NVML_SUCCESS);
    nvmlDevice_t dev;
    CHECK_EQ(by_index(0, &dev), NVML_SUCCESS);
    nvmlMemory_t m;
    CHECK_EQ(info(dev, &m), NVML_SUCCESS);
    CHECK_EQ(m.total, 1024 * MiB);
    CHECK_EQ(m.used, 300 * MiB);
    CHECK_EQ(m.free, 724 * MiB);
    nvmlMemory_v2_t m2;
    memset(&m2, 0, sizeof m2);
    m2.version = NVML_MEMORY_V2_VERSION;
    CHECK_EQ(info2(dev, &m2), NVML_SUCCESS);
    CHECK_EQ(m2.total, 1024 * MiB);
    CHECK_EQ(m2.free, 724 * MiB);
    CHECK_EQ(info(dev, NULL), NVML_ERROR_INVALID_ARGUMENT);
    CHECK_EQ(info2(dev, NULL), NVML_ERROR_INVALID_ARGUMENT);
    printf("ok\n");
    return 0;
}
