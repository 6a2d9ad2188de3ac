/* A fake libnvidia-ml.so.1: device handles and memory info from the same settings as fake libcuda. */
#include <vendor_api.h>

#include "fake_alloc.h"

#define FAKE_EXPORT __attribute__((visibility("default")))

FAKE_EXPORT nvmlReturn_t nvmlInit_v2(void) { return NVML_SUCCESS; }
FAKE_EXPORT nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    if (n == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *n = (unsigned int)fake_device_count();
    return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int idx, nvmlDevice_t *dev)
{
    if (dev == NULL || idx >= (unsigned int)fake_device_count())
        return NVML_ERROR_INVALID_ARGUMENT;
    *dev = (nvmlDevice_t)(uintptr_t)(idx + 1);
    return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t dev, unsigned int *idx)
{
    if (dev == NULL || idx == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *idx = (unsigned int)((uintptr_t)dev - 1);
    return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *m)
{
    if (dev == NULL || m == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    m->total = fake_total_bytes();
    m->used = 0; /* the fake card is idle as far as NVML knows */
    m->free = m->total;
    return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *m)
{
    if (dev == NULL || m == NULL || m->version != NVML_MEMORY_V2_VERSION)
        return NVML_ERROR_INVALID_ARGUMENT;
    m->total = fake_total_bytes();
    m->reserved = 0;
    m->used = 0;
    m->free = m->total;
    return NVML_SUCCESS;
}
