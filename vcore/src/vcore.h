/* Internal interfaces shared by the vcore sources (not installed, not part of any ABI). */
#ifndef VCORE_INTERNAL_H
#define VCORE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

#define VC_EXPORT __attribute__((visibility("default")))
#define VC_HIDDEN __attribute__((visibility("hidden")))

#define VC_MAX_DEV 64 /* devices one container can see; a higher index is refused, never unlimited */
#define VC_MAX_PROCS 1024
#define VC_MIB (1024ULL * 1024ULL)

/* ---- log.c ---- */
enum { VC_LOG_OFF = 0, VC_LOG_ERROR, VC_LOG_WARN, VC_LOG_INFO, VC_LOG_DEBUG };
extern int vc_log_level;
void vc_log_init(void);
void vc_log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The level test is inlined so disabled detail costs no call on the allocation path. */
#define vc_log(level, ...)                           \
    do {                                             \
        if ((level) <= vc_log_level)                 \
            vc_log_write((level), __VA_ARGS__);      \
    } while (0)
/* "2050" for whole MiB, "0.5" otherwise: the figures of the refusal line. */
void vc_fmt_mib(char *buf, size_t len, uint64_t bytes);

/* ---- region.c: the per-container accounting file shared by all processes ---- */
enum { VC_REGION_UNOPENED = 0, VC_REGION_OK = 1, VC_REGION_FAILED = -1 };
enum { VC_RESERVED = 0, VC_OVER_QUOTA = -1, VC_REGION_ERROR = -2 };

struct vc_shared;
struct vc_region {
    char path[4096];
    int state;              /* VC_REGION_* (atomic) */
    int slot;               /* this process's slot, -1 before registration */
    struct vc_shared *sh;
    pthread_mutex_t open_mu;
    char error[512];        /* why the region is unusable */
};

int vc_region_open(struct vc_region *r);
/* Reserve size bytes on dev unless the total would pass limit; *used gets the total before. */
int vc_region_reserve(struct vc_region *r, int dev, uint64_t size, uint64_t limit, uint64_t *used);
void vc_region_release(struct vc_region *r, int dev, uint64_t size);
/* Total bytes held on dev by live processes (dead ones are reclaimed first); -1 on error. */
int vc_region_used(struct vc_region *r, int dev, uint64_t *used);
void vc_region_detach(struct vc_region *r);
void vc_region_after_fork(struct vc_region *r);
/* Test hook: take the region lock and return without releasing it. */
int vc_region_lock_for_test(struct vc_region *r);

/* ---- ptrmap.c: allocation address -> (size, device), per process ---- */
struct vc_map_entry {
    uint64_t key;
    uint64_t size;
    int32_t dev;
    int32_t full;
};
struct vc_map {
    pthread_mutex_t mu;
    struct vc_map_entry *tab;
    size_t cap;
    size_t count;
};
#define VC_MAP_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0}
int vc_map_put(struct vc_map *m, uint64_t key, uint64_t size, int dev);
int vc_map_take(struct vc_map *m, uint64_t key, uint64_t *size, int *dev);
void vc_map_fork_prepare(struct vc_map *m);
void vc_map_fork_parent(struct vc_map *m);
void vc_map_fork_child(struct vc_map *m);

/* ---- config.c + quota.c: one accounting domain per vendor ---- */
struct vc_vendor {
    const char *name;                /* "cuda" or "npu" */
    int active;                      /* any limit configured: wrappers enforce */
    int fail_closed;                 /* configuration unusable: refuse every allocation */
    char reason[256];
    uint64_t limit[VC_MAX_DEV];      /* bytes, 0 = unlimited */
    int sm_limit[VC_MAX_DEV];        /* percent, 0 = unlimited */
    int priority;                    /* NPU_PRIORITY, informational */
    struct vc_region region;
};
extern struct vc_vendor vc_cuda, vc_npu;
extern int vc_disabled;

/* Parse "<number>[kKmMgG]" (powers of 1024, bare = bytes). 0 on success. */
int vc_parse_size(const char *text, uint64_t *out);
void vc_config_load(void);

enum { VC_UNTRACKED = 0, VC_CHARGED = 1, VC_DENIED = 2 };
int vc_charge(struct vc_vendor *v, int dev, uint64_t size);
void vc_uncharge(struct vc_vendor *v, int dev, uint64_t size);
/* Rewrite (total, free) as the container sees them; returns 0 if dev is not limited. */
int vc_virtual_info(struct vc_vendor *v, int dev, uint64_t real_total, uint64_t real_free,
                    uint64_t *total, uint64_t *free_bytes, uint64_t *used);

/* ---- hooks.c: the real dlsym, the real runtime libraries, answering dlsym ---- */
enum { VC_LIB_CUDA = 0, VC_LIB_NVML = 1, VC_LIB_ACL = 2, VC_LIB_COUNT };
void vc_hooks_init(void);
void *vc_real_dlsym(void *handle, const char *name);
void *vc_real(void **cache, int lib, const char *name, const void *self);
#define VC_REAL(lib, fn) \
    ({ static void *vc_cache_; (__typeof__(&fn))vc_real(&vc_cache_, lib, #fn, (const void *)&fn); })
#define VC_REAL_T(lib, type, name) \
    ({ static void *vc_cache_; (type)vc_real(&vc_cache_, lib, name, NULL); })

/* Exact exported name -> wrapper, for dlsym answers (NULL when not hooked or inactive). */
void *vc_cuda_hook(const char *name);
void *vc_nvml_hook(const char *name);
void *vc_acl_hook(const char *name);
/* cuGetProcAddress: base name + CUDA version (+ flags) -> wrapper, or NULL. */
void *vc_cuda_proc_hook(const char *symbol, int cuda_version, unsigned long long flags);

/* ---- throttle.c ---- */
void vc_throttle_before_launch(int dev);

/* ---- cuda.c / acl.c fork handling ---- */
void vc_cuda_fork(int phase);
void vc_acl_fork(int phase);
enum { VC_FORK_PREPARE, VC_FORK_PARENT, VC_FORK_CHILD };

#endif
