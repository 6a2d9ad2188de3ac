/*
 * Load-time setup and the dlsym answer.
 *
 * CUDA 12 runtimes dlopen("libcuda.so.1"), take cuGetProcAddress with dlsym on that handle and
 * resolve everything else through it; NVML users do the same with libnvidia-ml.so.1. A handle
 * lookup never sees a preloaded library, so vcore answers dlsym itself: for an exact name it
 * wraps, it returns the wrapper when the real lookup on that handle finds the symbol (so lookups on
 * unrelated libraries keep returning NULL). Every other lookup goes to the real dlsym untouched.
 * dlsym(RTLD_NEXT, ...) must see the caller's return address, so dlsym itself is a few
 * instructions of assembly (dlsym_tramp.S) that tail-jump to the real one for RTLD_NEXT.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "vcore.h"

typedef void *(*dlsym_fn)(void *, const char *);
VC_HIDDEN dlsym_fn vcore_real_dlsym_ptr;

static const char *const lib_names[VC_LIB_COUNT] = {"libcuda.so.1", "libnvidia-ml.so.1", "libascendcl.so"};
static void *lib_handles[VC_LIB_COUNT];

static void init_real_dlsym(void)
{
#ifdef VCORE_NO_DLSYM_HOOK
    __atomic_store_n(&vcore_real_dlsym_ptr, (dlsym_fn)dlsym, __ATOMIC_RELEASE);
#else
    if (__atomic_load_n(&vcore_real_dlsym_ptr, __ATOMIC_ACQUIRE) != NULL)
        return;
    void *p = NULL;
#ifdef VC_GLIBC_BASE
    p = dlvsym(RTLD_NEXT, "dlsym", VC_GLIBC_BASE);
#endif
    if (p == NULL)
        p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    __atomic_store_n(&vcore_real_dlsym_ptr, (dlsym_fn)p, __ATOMIC_RELEASE);
#endif
}

void *vc_real_dlsym(void *handle, const char *name)
{
    dlsym_fn f = __atomic_load_n(&vcore_real_dlsym_ptr, __ATOMIC_ACQUIRE);
    if (f == NULL) {
        init_real_dlsym();
        f = __atomic_load_n(&vcore_real_dlsym_ptr, __ATOMIC_ACQUIRE);
        if (f == NULL)
            return NULL;
    }
    return f(handle, name);
}

static void *lib_handle(int lib)
{
    void *h = __atomic_load_n(&lib_handles[lib], __ATOMIC_ACQUIRE);
    if (h != NULL)
        return h;
    h = dlopen(lib_names[lib], RTLD_LAZY | RTLD_LOCAL);
    if (h == NULL) {
        vc_log(VC_LOG_ERROR, "cannot load the real %s: %s", lib_names[lib], dlerror());
        return NULL;
    }
    void *expected = NULL;
    if (!__atomic_compare_exchange_n(&lib_handles[lib], &expected, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        dlclose(h); /* another thread won; drop our extra reference */
        return expected;
    }
    return h;
}

void *vc_real(void **cache, int lib, const char *name, const void *self)
{
    void *p = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (p != NULL)
        return p;
    void *h = lib_handle(lib);
    if (h == NULL)
        return NULL;
    p = vc_real_dlsym(h, name);
    if (p == self && p != NULL) {
        /* Never call ourselves: that would recurse forever. */
        vc_log(VC_LOG_ERROR, "%s resolved to vcore's own wrapper; refusing to recurse", name);
        p = NULL;
    }
    if (p == NULL)
        vc_log(VC_LOG_DEBUG, "%s: no %s in %s", __func__, name, lib_names[lib]);
    __atomic_store_n(cache, p, __ATOMIC_RELEASE);
    return p;
}

static void *hook_for(const char *name)
{
    if (vc_disabled || name == NULL)
        return NULL;
    if (name[0] == 'c' && name[1] == 'u' && vc_cuda.active)
        return vc_cuda_hook(name);
    if (name[0] == 'n' && strncmp(name, "nvml", 4) == 0 && vc_cuda.active)
        return vc_nvml_hook(name);
    if (name[0] == 'a' && strncmp(name, "acl", 3) == 0 && vc_npu.active)
        return vc_acl_hook(name);
    return NULL;
}

VC_HIDDEN void *vcore_dlsym_slow(void *handle, const char *name)
{
    if (handle != RTLD_NEXT) {
        void *wrapper = hook_for(name);
        if (wrapper != NULL)
            return vc_real_dlsym(handle, name) != NULL ? wrapper : NULL;
    }
    /* RTLD_NEXT only lands here before initialisation: the search starts after vcore itself,
     * which is preloaded and so early in the search order. */
    return vc_real_dlsym(handle, name);
}

#if defined(VCORE_NO_DLSYM_HOOK)
/* Sanitizer builds link the sources into a test program: no dlsym override there. */
#elif !defined(__x86_64__) && !defined(__aarch64__)
VC_EXPORT void *dlsym(void *handle, const char *name) { return vcore_dlsym_slow(handle, name); }
#endif

static void fork_prepare(void)
{
    vc_cuda_fork(VC_FORK_PREPARE);
    vc_acl_fork(VC_FORK_PREPARE);
}
static void fork_parent(void)
{
    vc_cuda_fork(VC_FORK_PARENT);
    vc_acl_fork(VC_FORK_PARENT);
}
static void fork_child(void)
{
    vc_cuda_fork(VC_FORK_CHILD);
    vc_acl_fork(VC_FORK_CHILD);
    vc_region_after_fork(&vc_cuda.region);
    vc_region_after_fork(&vc_npu.region);
}

__attribute__((constructor(101))) static void vcore_load(void)
{
    init_real_dlsym();
    vc_log_init();
    vc_config_load();
    if (vc_cuda.active || vc_npu.active)
        pthread_atfork(fork_prepare, fork_parent, fork_child);
}

__attribute__((destructor)) static void vcore_unload(void)
{
    /* Normal exit: give this process's share back at once instead of waiting for a reclaim. */
    vc_region_detach(&vc_cuda.region);
    vc_region_detach(&vc_npu.region);
}
