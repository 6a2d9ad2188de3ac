/*
 * AscendCL: aclrtMalloc* reserve against NPU_MEM_QUOTA before allocating, aclrtFree releases,
 * aclrtGetMemInfo reports the quota as the total. Only the ACL layer is wrapped: ACL calls the RTS
 * layer (rtMalloc) underneath, so wrapping both would count every allocation twice.
 */
#include <string.h>

#include <vendor_api.h>

#include "vcore.h"

static struct vc_map npu_ptrs = VC_MAP_INIT;

typedef aclError (*get_device_fn)(int32_t *);

static int current_device(void)
{
    get_device_fn f = VC_REAL_T(VC_LIB_ACL, get_device_fn, "aclrtGetDevice");
    int32_t dev = 0;
    if (f == NULL || f(&dev) != ACL_SUCCESS)
        return 0;
    return dev;
}

typedef aclError (*malloc_fn)(void **, size_t, int);

static aclError charged_malloc(malloc_fn f, void **ptr, size_t size, int policy)
{
    if (!vc_npu.active || vc_disabled || ptr == NULL || size == 0)
        return f(ptr, size, policy);
    int dev = current_device();
    int c = vc_charge(&vc_npu, dev, size);
    if (c == VC_DENIED)
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    aclError rc = f(ptr, size, policy);
    if (c == VC_CHARGED) {
        if (rc == ACL_SUCCESS)
            vc_map_put(&npu_ptrs, (uint64_t)(uintptr_t)*ptr, size, dev);
        else
            vc_uncharge(&vc_npu, dev, size);
    }
    return rc;
}

VC_EXPORT aclError aclrtMalloc(void **ptr, size_t size, int policy)
{
    malloc_fn f = (malloc_fn)VC_REAL(VC_LIB_ACL, aclrtMalloc);
    return f == NULL ? ACL_ERROR_RT_MEMORY_ALLOCATION : charged_malloc(f, ptr, size, policy);
}

VC_EXPORT aclError aclrtMallocCached(void **ptr, size_t size, int policy)
{
    malloc_fn f = (malloc_fn)VC_REAL(VC_LIB_ACL, aclrtMallocCached);
    return f == NULL ? ACL_ERROR_RT_MEMORY_ALLOCATION : charged_malloc(f, ptr, size, policy);
}

VC_EXPORT aclError aclrtMallocAlign32(void **ptr, size_t size, int policy)
{
    malloc_fn f = (malloc_fn)VC_REAL(VC_LIB_ACL, aclrtMallocAlign32);
    return f == NULL ? ACL_ERROR_RT_MEMORY_ALLOCATION : charged_malloc(f, ptr, size, policy);
}

VC_EXPORT aclError aclrtFree(void *ptr)
{
    __typeof__(&aclrtFree) f = VC_REAL(VC_LIB_ACL, aclrtFree);
    if (f == NULL)
        return ACL_ERROR_INVALID_PARAM;
    if (ptr == NULL)
        return f(ptr);
    uint64_t size = 0;
    int dev = 0;
    int known = vc_map_take(&npu_ptrs, (uint64_t)(uintptr_t)ptr, &size, &dev);
    aclError rc = f(ptr);
    if (known) {
        if (rc == ACL_SUCCESS)
            vc_uncharge(&vc_npu, dev, size);
        else
            vc_map_put(&npu_ptrs, (uint64_t)(uintptr_t)ptr, size, dev);
    }
    return rc;
}

VC_EXPORT aclError aclrtGetMemInfo(int attr, size_t *free_bytes, size_t *total_bytes)
{
    __typeof__(&aclrtGetMemInfo) f = VC_REAL(VC_LIB_ACL, aclrtGetMemInfo);
    if (f == NULL)
        return ACL_ERROR_INVALID_PARAM;
    if (!vc_npu.active || vc_disabled)
        return f(attr, free_bytes, total_bytes);
    if (free_bytes == NULL || total_bytes == NULL)
        return ACL_ERROR_INVALID_PARAM;
    size_t rf = 0, rt = 0;
    aclError rc = f(attr, &rf, &rt);
    if (rc != ACL_SUCCESS)
        return rc;
    uint64_t t = rt, fr = rf;
    if (rt != 0) /* an attribute the device does not have stays 0 */
        vc_virtual_info(&vc_npu, current_device(), rt, rf, &t, &fr, NULL);
    *free_bytes = (size_t)fr;
    *total_bytes = (size_t)t;
    return ACL_SUCCESS;
}

void *vc_acl_hook(const char *name)
{
    static const struct {
        const char *name;
        void *wrapper;
    } table[] = {
        {"aclrtMalloc", (void *)aclrtMalloc},
        {"aclrtMallocCached", (void *)aclrtMallocCached},
        {"aclrtMallocAlign32", (void *)aclrtMallocAlign32},
        {"aclrtFree", (void *)aclrtFree},
        {"aclrtGetMemInfo", (void *)aclrtGetMemInfo},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, name) == 0)
            return table[i].wrapper;
    return NULL;
}

void vc_acl_fork(int phase)
{
    if (phase == VC_FORK_PREPARE)
        vc_map_fork_prepare(&npu_ptrs);
    else if (phase == VC_FORK_PARENT)
        vc_map_fork_parent(&npu_ptrs);
    else
        vc_map_fork_child(&npu_ptrs);
}
