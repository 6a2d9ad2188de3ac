/* NVML: memory info as the container sees it (nvidia-smi, pynvml, monitoring inside the pod). */
#include <string.h>

#include <vendor_api.h>

#include "vcore.h"

typedef nvmlReturn_t (*get_index_fn)(nvmlDevice_t, unsigned int *);

static int device_index(nvmlDevice_t device)
{
    get_index_fn f = VC_REAL_T(VC_LIB_NVML, get_index_fn, "nvmlDeviceGetIndex");
    unsigned int idx = 0;
    if (f == NULL || f(device, &idx) != NVML_SUCCESS)
        return -1;
    return (int)idx;
}

VC_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    __typeof__(&nvmlDeviceGetMemoryInfo) f = VC_REAL(VC_LIB_NVML, nvmlDeviceGetMemoryInfo);
    if (f == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!vc_cuda.active || vc_disabled)
        return f(device, memory);
    if (memory == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = f(device, memory);
    if (rc != NVML_SUCCESS)
        return rc;
    uint64_t t, fr, used;
    if (vc_virtual_info(&vc_cuda, device_index(device), memory->total, memory->free, &t, &fr, &used)) {
        memory->total = t;
        memory->free = fr;
        memory->used = t - fr;
    }
    return rc;
}

VC_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    __typeof__(&nvmlDeviceGetMemoryInfo_v2) f = VC_REAL(VC_LIB_NVML, nvmlDeviceGetMemoryInfo_v2);
    if (f == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!vc_cuda.active || vc_disabled)
        return f(device, memory);
    if (memory == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = f(device, memory);
    if (rc != NVML_SUCCESS)
        return rc;
    uint64_t t, fr, used;
    if (vc_virtual_info(&vc_cuda, device_index(device), memory->total, memory->free, &t, &fr, &used)) {
        memory->total = t;
        memory->free = fr;
        memory->used = t - fr;
        memory->reserved = 0;
    }
    return rc;
}

void *vc_nvml_hook(const char *name)
{
    if (strcmp(name, "nvmlDeviceGetMemoryInfo") == 0)
        return (void *)nvmlDeviceGetMemoryInfo;
    if (strcmp(name, "nvmlDeviceGetMemoryInfo_v2") == 0)
        return (void *)nvmlDeviceGetMemoryInfo_v2;
    return NULL;
}
