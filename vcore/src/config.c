/*
 * Configuration from the environment the node driver injects (HAMi-core / HAMivNPUCore names).
 * Read once at load; nothing here touches a file, so loading the library into every process of a
 * container (through /etc/ld.so.preload) costs a few getenv calls.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "vcore.h"

#define DEFAULT_CUDA_REGION "/tmp/vcore-cuda.cache"
#define DEFAULT_NPU_REGION "/tmp/vcore-npu.cache"
/* The per-claim directories the node driver mounts into every claim container (the enforcement
 * layouts in dralab/model/enforcement.py). A tenant cannot remove a mount point, so their presence
 * marks a claim container, where a missing limit fails closed instead of lifting the quota. */
#ifndef VC_CUDA_CLAIM_DIR
#define VC_CUDA_CLAIM_DIR "/usr/local/vgpu"
#endif
#ifndef VC_NPU_CLAIM_DIR
#define VC_NPU_CLAIM_DIR "/hami-vnpu-shmem"
#endif

struct vc_vendor vc_cuda = {.name = "cuda", .region = {.open_mu = PTHREAD_MUTEX_INITIALIZER, .slot = -1}};
struct vc_vendor vc_npu = {.name = "npu", .region = {.open_mu = PTHREAD_MUTEX_INITIALIZER, .slot = -1}};
int vc_disabled;

int vc_parse_size(const char *text, uint64_t *out)
{
    if (text == NULL)
        return -1;
    while (isspace((unsigned char)*text))
        text++;
    if (!isdigit((unsigned char)*text))
        return -1;
    errno = 0;
    char *end;
    unsigned long long n = strtoull(text, &end, 10);
    if (errno != 0)
        return -1;
    uint64_t mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1ULL << 10; end++; break;
    case 'm': case 'M': mult = 1ULL << 20; end++; break;
    case 'g': case 'G': mult = 1ULL << 30; end++; break;
    default: break;
    }
    while (isspace((unsigned char)*end))
        end++;
    if (*end != '\0' || (n != 0 && mult > UINT64_MAX / n))
        return -1;
    *out = n * mult;
    return 0;
}

static int parse_int(const char *text, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static void refuse(struct vc_vendor *v, const char *fmt, const char *name, const char *value)
{
    v->fail_closed = 1;
    snprintf(v->reason, sizeof v->reason, fmt, name, value);
    vc_log(VC_LOG_ERROR, "%s", v->reason);
}

/* Whether the vendor's claim directory exists. Debug builds read a ':'-separated list from
 * VCORE_CLAIM_DIRS instead (tests); release builds only use the compiled-in directory. */
static int in_claim_container(const char *dirs)
{
#ifdef VCORE_DEBUG
    const char *env = getenv("VCORE_CLAIM_DIRS");
    if (env != NULL)
        dirs = env;
#endif
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", dirs);
    char *save = NULL;
    for (char *d = strtok_r(buf, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
        /* open(O_DIRECTORY), not stat(): stat@GLIBC_2.33 would raise the glibc floor (compat.h) */
        int fd = *d != '\0' ? open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (fd >= 0) {
            close(fd);
            return 1;
        }
    }
    return 0;
}

static void require_limit(struct vc_vendor *v, const char *names)
{
    if (v->fail_closed)
        return;
    for (int i = 0; i < VC_MAX_DEV; i++)
        if (v->limit[i] != 0)
            return;
    v->active = 1;
    refuse(v, "no usable %s in a claim container%s: every allocation is refused (the node driver sets it)",
           names, "");
}

static void set_region(struct vc_vendor *v, const char *env, const char *fallback)
{
    const char *path = getenv(env);
    if (path == NULL || *path == '\0')
        path = fallback;
    snprintf(v->region.path, sizeof v->region.path, "%s", path);
}

static void load_cuda(struct vc_vendor *v)
{
    const char *bad = "invalid %s=%s: use a number with an optional k/m/g suffix; every allocation is refused";
    uint64_t all = 0;
    const char *text = getenv("CUDA_DEVICE_MEMORY_LIMIT");
    if (text != NULL && *text != '\0' && vc_parse_size(text, &all) != 0)
        refuse(v, bad, "CUDA_DEVICE_MEMORY_LIMIT", text);
    int sm_all = 0;
    text = getenv("CUDA_DEVICE_SM_LIMIT");
    if (text != NULL && *text != '\0' && parse_int(text, 0, 100, &sm_all) != 0)
        vc_log(VC_LOG_ERROR, "invalid CUDA_DEVICE_SM_LIMIT=%s (0-100): ignored", text);
    for (int i = 0; i < VC_MAX_DEV; i++) {
        char name[64];
        snprintf(name, sizeof name, "CUDA_DEVICE_MEMORY_LIMIT_%d", i);
        v->limit[i] = all;
        text = getenv(name);
        if (text != NULL && *text != '\0' && vc_parse_size(text, &v->limit[i]) != 0)
            refuse(v, bad, name, text);
        snprintf(name, sizeof name, "CUDA_DEVICE_SM_LIMIT_%d", i);
        v->sm_limit[i] = sm_all;
        text = getenv(name);
        if (text != NULL && *text != '\0' && parse_int(text, 0, 100, &v->sm_limit[i]) != 0)
            vc_log(VC_LOG_ERROR, "invalid %s=%s (0-100): ignored", name, text);
        if (v->limit[i] != 0 || (v->sm_limit[i] > 0 && v->sm_limit[i] < 100))
            v->active = 1;
    }
    v->active |= v->fail_closed;
    set_region(v, "CUDA_DEVICE_MEMORY_SHARED_CACHE", DEFAULT_CUDA_REGION);
}

static void load_npu(struct vc_vendor *v)
{
    const char *text = getenv("NPU_MEM_QUOTA");
    if (text != NULL && *text != '\0') {
        uint64_t mib = 0;
        char *end;
        errno = 0;
        mib = strtoull(text, &end, 10);
        if (errno != 0 || end == text || *end != '\0' || mib > (UINT64_MAX >> 20))
            refuse(v, "invalid %s=%s: use a whole number of MiB; every allocation is refused",
                   "NPU_MEM_QUOTA", text);
        else
            for (int i = 0; i < VC_MAX_DEV; i++)
                v->limit[i] = mib * VC_MIB;
        v->active = v->fail_closed || mib != 0;
    }
    text = getenv("NPU_PRIORITY");
    if (text != NULL && *text != '\0' && parse_int(text, 0, 100, &v->priority) != 0)
        vc_log(VC_LOG_ERROR, "invalid NPU_PRIORITY=%s (0-100): ignored", text);
    set_region(v, "NPU_LOCAL_SHM_PATH", DEFAULT_NPU_REGION);
}

void vc_config_load(void)
{
    const char *off = getenv("VCORE_DISABLE");
#ifdef VCORE_DEBUG
    vc_disabled = off != NULL && strcmp(off, "1") == 0;
    if (vc_disabled)
        return;
#else
    if (off != NULL && *off != '\0')
        vc_log(VC_LOG_WARN, "VCORE_DISABLE is ignored: only debug builds of vcore can be switched off");
#endif
    load_cuda(&vc_cuda);
    load_npu(&vc_npu);
    if (in_claim_container(VC_CUDA_CLAIM_DIR))
        require_limit(&vc_cuda, "CUDA_DEVICE_MEMORY_LIMIT[_<i>]");
    if (in_claim_container(VC_NPU_CLAIM_DIR))
        require_limit(&vc_npu, "NPU_MEM_QUOTA");
    if (vc_cuda.active)
        vc_log(VC_LOG_DEBUG, "cuda: device 0 limit %llu bytes, sm %d%%, region %s",
               (unsigned long long)vc_cuda.limit[0], vc_cuda.sm_limit[0], vc_cuda.region.path);
    if (vc_npu.active)
        vc_log(VC_LOG_DEBUG, "npu: quota %llu MiB, priority %d (not enforced here), region %s",
               (unsigned long long)(vc_npu.limit[0] / VC_MIB), vc_npu.priority, vc_npu.region.path);
}
