/* A fake libascendcl.so: device selection, memory allocation and memory info, no device. */
#include <vendor_api.h>

#include "fake_alloc.h"

#define FAKE_EXPORT __attribute__((visibility("default")))
#define ACL_ERROR_RT_CONTEXT_NULL 107002

static __thread int current_dev = -1;

FAKE_EXPORT aclError aclInit(const char *config)
{
    (void)config;
    return ACL_SUCCESS;
}
FAKE_EXPORT aclError aclFinalize(void) { return ACL_SUCCESS; }
FAKE_EXPORT aclError aclrtGetDeviceCount(uint32_t *n)
{
    if (n == NULL)
        return ACL_ERROR_INVALID_PARAM;
    *n = (uint32_t)fake_device_count();
    return ACL_SUCCESS;
}
FAKE_EXPORT aclError aclrtSetDevice(int32_t dev)
{
    if (dev < 0 || dev >= fake_device_count())
        return ACL_ERROR_INVALID_PARAM;
    current_dev = dev;
    return ACL_SUCCESS;
}
FAKE_EXPORT aclError aclrtResetDevice(int32_t dev)
{
    (void)dev;
    current_dev = -1;
    return ACL_SUCCESS;
}
FAKE_EXPORT aclError aclrtGetDevice(int32_t *dev)
{
    if (dev == NULL)
        return ACL_ERROR_INVALID_PARAM;
    if (current_dev < 0)
        return ACL_ERROR_RT_CONTEXT_NULL;
    *dev = current_dev;
    return ACL_SUCCESS;
}

static aclError acl_alloc(void **ptr, size_t size)
{
    if (ptr == NULL || size == 0)
        return ACL_ERROR_INVALID_PARAM;
    uint64_t addr;
    if (fake_alloc(current_dev < 0 ? 0 : current_dev, size, &addr) != 0)
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    *ptr = (void *)(uintptr_t)addr;
    return ACL_SUCCESS;
}
FAKE_EXPORT aclError aclrtMalloc(void **ptr, size_t size, int policy)
{
    (void)policy;
    return acl_alloc(ptr, size);
}
FAKE_EXPORT aclError aclrtMallocCached(void **ptr, size_t size, int policy)
{
    (void)policy;
    return acl_alloc(ptr, size);
}
FAKE_EXPORT aclError aclrtMallocAlign32(void **ptr, size_t size, int policy)
{
    (void)policy;
    return acl_alloc(ptr, size);
}
FAKE_EXPORT aclError aclrtFree(void *ptr)
{
    return fake_release((uint64_t)(uintptr_t)ptr) == 0 ? ACL_SUCCESS : ACL_ERROR_INVALID_PARAM;
}
FAKE_EXPORT aclError aclrtGetMemInfo(int attr, size_t *free_bytes, size_t *total_bytes)
{
    (void)attr;
    if (free_bytes == NULL || total_bytes == NULL)
        return ACL_ERROR_INVALID_PARAM;
    uint64_t total = fake_total_bytes(), used = fake_used_on(current_dev < 0 ? 0 : current_dev);
    *total_bytes = (size_t)total;
    *free_bytes = (size_t)(used < total ? total - used : 0);
    return ACL_SUCCESS;
}
