/*
 * The shared accounting region: one file per container, mapped by every process that allocates.
 *
 * Layout: a header (magic, layout version, sizes), a robust process-shared mutex, per-device
 * totals and one slot per process (pid, start time, bytes held per device). Every allocation
 * reserves under the lock before the real allocation runs, so racing processes cannot overshoot.
 * Dead processes are found by pid + start time (a reused pid does not keep a dead share) and their
 * shares reclaimed; a lock whose holder died is recovered through EOWNERDEAD and the totals are
 * rebuilt from the slots, since the holder may have died half way through an update.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vcore.h"

#define VC_MAGIC 0x31475265726f6376ULL /* "vcoreRG1" little-endian */
#define VC_LAYOUT_VERSION 2 /* 2: 64 devices */

struct vc_slot {
    int32_t pid;
    uint32_t pad;
    uint64_t start_time;
    uint64_t pidns; /* pid namespace inode: pids are only comparable within one namespace */
    uint64_t used[VC_MAX_DEV];
};

struct vc_shared {
    uint64_t magic;
    uint32_t version;
    uint32_t max_devices;
    uint32_t max_procs;
    uint32_t mutex_size;
    uint64_t region_size;
    union {
        pthread_mutex_t lock;
        char pad[64];
    } u;
    uint64_t total[VC_MAX_DEV];
    struct vc_slot slots[VC_MAX_PROCS];
};

/* Field 22 of /proc/<pid>/stat (start time in clock ticks) and the state letter. */
static int proc_stat(int pid, uint64_t *start, char *state)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -1 : -2;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -2;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL || p[1] == '\0')
        return -2;
    p += 2;
    *state = *p;
    /* p is at field 3; skip to field 22. */
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (p == NULL)
            return -2;
        p++;
    }
    *start = strtoull(p, NULL, 10);
    return 0;
}

/* Inode of /proc/self/ns/pid ("pid:[4026531836]"), 0 when unknown. */
static uint64_t own_pidns(void)
{
    static uint64_t cached;
    uint64_t known = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (known != 0)
        return known;
    char buf[64];
    ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *open_bracket = strchr(buf, '[');
    known = open_bracket != NULL ? strtoull(open_bracket + 1, NULL, 10) : 0;
    __atomic_store_n(&cached, known, __ATOMIC_RELAXED);
    return known;
}

static int slot_dead(const struct vc_slot *s)
{
    /* Containers of one pod may share a claim without sharing a pid namespace: a pid from
     * another namespace means nothing here, so such a slot is left to its own namespace. */
    if (s->pidns != own_pidns())
        return 0;
    if (kill(s->pid, 0) != 0 && errno == ESRCH)
        return 1;
    uint64_t start = 0;
    char state = '?';
    int rc = proc_stat(s->pid, &start, &state);
    if (rc == -1)
        return 1;
    if (rc != 0)
        return 0; /* cannot tell: keep the share */
    if (state == 'Z' || state == 'X')
        return 1; /* exited; the device freed its memory already */
    return s->start_time != 0 && start != s->start_time;
}

static void clear_slot(struct vc_shared *sh, struct vc_slot *s)
{
    for (int d = 0; d < VC_MAX_DEV; d++) {
        uint64_t u = s->used[d];
        sh->total[d] = sh->total[d] > u ? sh->total[d] - u : 0;
    }
    memset(s, 0, sizeof *s);
}

/* Caller holds the lock. */
static int reclaim_dead(struct vc_shared *sh, int self_pid)
{
    int freed = 0;
    for (int i = 0; i < VC_MAX_PROCS; i++) {
        struct vc_slot *s = &sh->slots[i];
        if (s->pid == 0 || s->pid == self_pid || !slot_dead(s))
            continue;
        uint64_t held = 0;
        for (int d = 0; d < VC_MAX_DEV; d++)
            held += s->used[d];
        vc_log(VC_LOG_INFO, "reclaimed %llu bytes held by dead process %d",
               (unsigned long long)held, s->pid);
        clear_slot(sh, s);
        freed++;
    }
    return freed;
}

static void rebuild_totals(struct vc_shared *sh)
{
    memset(sh->total, 0, sizeof sh->total);
    for (int i = 0; i < VC_MAX_PROCS; i++) {
        if (sh->slots[i].pid == 0)
            continue;
        for (int d = 0; d < VC_MAX_DEV; d++)
            sh->total[d] += sh->slots[i].used[d];
    }
}

static int region_lock(struct vc_region *r)
{
    struct vc_shared *sh = r->sh;
    int rc = pthread_mutex_lock(&sh->u.lock);
    if (rc == EOWNERDEAD) {
        reclaim_dead(sh, getpid());
        rebuild_totals(sh);
        pthread_mutex_consistent(&sh->u.lock);
        vc_log(VC_LOG_INFO, "recovered the region lock of a process that died holding it");
        return 0;
    }
    if (rc != 0) {
        snprintf(r->error, sizeof r->error, "shared region %s: lock unusable (error %d); remove the file",
                 r->path, rc);
        vc_log(VC_LOG_ERROR, "%s", r->error);
        return -1;
    }
    return 0;
}

static void region_unlock(struct vc_region *r) { pthread_mutex_unlock(&r->sh->u.lock); }

static int init_shared(struct vc_shared *sh)
{
    memset(sh, 0, sizeof *sh);
    pthread_mutexattr_t attr;
    if (pthread_mutexattr_init(&attr) != 0)
        return -1;
    int rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    if (rc == 0)
        rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    if (rc == 0)
        rc = pthread_mutex_init(&sh->u.lock, &attr);
    pthread_mutexattr_destroy(&attr);
    if (rc != 0)
        return -1;
    sh->version = VC_LAYOUT_VERSION;
    sh->max_devices = VC_MAX_DEV;
    sh->max_procs = VC_MAX_PROCS;
    sh->mutex_size = (uint32_t)sizeof(pthread_mutex_t);
    sh->region_size = sizeof *sh;
    __atomic_store_n(&sh->magic, VC_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

static int fail(struct vc_region *r, const char *fmt, const char *detail)
{
    snprintf(r->error, sizeof r->error, fmt, r->path, detail);
    vc_log(VC_LOG_ERROR, "%s", r->error);
    __atomic_store_n(&r->state, VC_REGION_FAILED, __ATOMIC_RELEASE);
    return -1;
}

/* The region's mode: 0600, private to the container's user, unless the directory holding it is
 * group-writable: the node driver makes each claim's directory 0770 for a group that only that claim's
 * containers get, and then every user of the container shares the region through the group (0660).
 * Another tenant can neither read nor truncate it either way. fstat through syscall(): the glibc
 * wrapper's symbol version would raise the glibc floor (compat.h). */
static mode_t region_mode(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0600;
    struct stat st;
    long rc = syscall(SYS_fstat, dfd, &st);
    close(dfd);
    return rc == 0 && (st.st_mode & S_IWGRP) ? 0660 : 0600;
}

static int open_file(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 && errno == ENOENT) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash != NULL && slash != dir) {
            *slash = '\0';
            mkdir(dir, 0700);
            fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        }
    }
    return fd;
}

int vc_region_open(struct vc_region *r)
{
    int state = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
    if (state != VC_REGION_UNOPENED)
        return state == VC_REGION_OK ? 0 : -1;
    pthread_mutex_lock(&r->open_mu);
    state = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
    if (state != VC_REGION_UNOPENED) {
        pthread_mutex_unlock(&r->open_mu);
        return state == VC_REGION_OK ? 0 : -1;
    }
    int rc = -1;
    int fd = open_file(r->path);
    if (fd < 0) {
        rc = fail(r, "shared region %s: cannot open: %s; mount a writable directory there", strerror(errno));
        goto out;
    }
    fchmod(fd, region_mode(r->path)); /* not masked by the umask; best effort (it may be another user's) */
    if (flock(fd, LOCK_EX) != 0) {
        rc = fail(r, "shared region %s: cannot lock: %s", strerror(errno));
        goto out_fd;
    }
    off_t size = lseek(fd, 0, SEEK_END);
    int fresh = size == 0;
    if (fresh && ftruncate(fd, (off_t)sizeof(struct vc_shared)) != 0) {
        rc = fail(r, "shared region %s: cannot size: %s", strerror(errno));
        goto out_fd;
    }
    if (!fresh && size < (off_t)offsetof(struct vc_shared, u)) {
        rc = fail(r, "shared region %s is corrupt (%s); remove the file to start a new one", "too short");
        goto out_fd;
    }
    size_t map_len = fresh ? sizeof(struct vc_shared) : (size_t)size;
    void *mem = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mem == MAP_FAILED) {
        rc = fail(r, "shared region %s: cannot map: %s", strerror(errno));
        goto out_fd;
    }
    struct vc_shared *sh = mem;
    uint64_t magic = __atomic_load_n(&sh->magic, __ATOMIC_ACQUIRE);
    if (!fresh && magic == 0 && sh->version == 0 && (size_t)size == sizeof *sh)
        fresh = 1; /* a creator died before finishing: nobody can have used it */
    if (!fresh) {
        char detail[160];
        if (magic != VC_MAGIC) {
            snprintf(detail, sizeof detail, "bad magic 0x%016llx", (unsigned long long)magic);
            munmap(mem, map_len);
            rc = fail(r, "shared region %s is corrupt (%s); remove the file to start a new one", detail);
            goto out_fd;
        }
        if (sh->version != VC_LAYOUT_VERSION || sh->max_devices != VC_MAX_DEV ||
            sh->max_procs != VC_MAX_PROCS || sh->mutex_size != sizeof(pthread_mutex_t) ||
            sh->region_size != sizeof *sh || (size_t)size != sizeof *sh) {
            snprintf(detail, sizeof detail,
                     "layout version %u with %u devices, %u slots, %llu bytes; this library expects "
                     "version %u with %u, %u, %zu",
                     sh->version, sh->max_devices, sh->max_procs, (unsigned long long)size,
                     VC_LAYOUT_VERSION, VC_MAX_DEV, VC_MAX_PROCS, sizeof *sh);
            munmap(mem, map_len);
            rc = fail(r, "shared region %s was made by another vcore version (%s); use one library "
                         "version per container or remove the file", detail);
            goto out_fd;
        }
    } else if (init_shared(sh) != 0) {
        munmap(mem, map_len);
        rc = fail(r, "shared region %s: %s", "cannot initialise the lock");
        goto out_fd;
    }
    r->sh = sh;
    r->slot = -1;
    __atomic_store_n(&r->state, VC_REGION_OK, __ATOMIC_RELEASE);
    vc_log(VC_LOG_DEBUG, "shared region %s attached (%s)", r->path, fresh ? "created" : "existing");
    rc = 0;
out_fd:
    flock(fd, LOCK_UN);
    close(fd);
out:
    pthread_mutex_unlock(&r->open_mu);
    return rc;
}

/* Caller holds the lock. A slot with our own pid is a leftover of an earlier image (exec). */
static int register_self(struct vc_region *r)
{
    struct vc_shared *sh = r->sh;
    int pid = getpid();
    uint64_t start = 0;
    char state;
    if (proc_stat(pid, &start, &state) != 0)
        start = 0;
    int free_slot = -1;
    for (int pass = 0; pass < 2 && free_slot < 0; pass++) {
        for (int i = 0; i < VC_MAX_PROCS; i++) {
            struct vc_slot *s = &sh->slots[i];
            if (s->pid == pid && s->pidns == own_pidns()) {
                clear_slot(sh, s);
                free_slot = i;
                break;
            }
            if (s->pid == 0 && free_slot < 0)
                free_slot = i;
        }
        if (free_slot < 0 && reclaim_dead(sh, pid) == 0)
            break;
    }
    if (free_slot < 0) {
        vc_log(VC_LOG_ERROR, "shared region %s: all %d process slots are held by live processes",
               r->path, VC_MAX_PROCS);
        return -1;
    }
    sh->slots[free_slot].pid = pid;
    sh->slots[free_slot].start_time = start;
    sh->slots[free_slot].pidns = own_pidns();
    r->slot = free_slot;
    return 0;
}

int vc_region_reserve(struct vc_region *r, int dev, uint64_t size, uint64_t limit, uint64_t *used)
{
    if (vc_region_open(r) != 0 || region_lock(r) != 0)
        return VC_REGION_ERROR;
    struct vc_shared *sh = r->sh;
    if (r->slot < 0 && register_self(r) != 0) {
        region_unlock(r);
        return VC_REGION_ERROR;
    }
    uint64_t cur = sh->total[dev];
    if (size > limit || cur > limit - size) {
        if (reclaim_dead(sh, getpid()) > 0)
            cur = sh->total[dev];
        if (size > limit || cur > limit - size) {
            region_unlock(r);
            *used = cur;
            return VC_OVER_QUOTA;
        }
    }
    sh->slots[r->slot].used[dev] += size;
    sh->total[dev] = cur + size;
    region_unlock(r);
    *used = cur;
    return VC_RESERVED;
}

void vc_region_release(struct vc_region *r, int dev, uint64_t size)
{
    if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != VC_REGION_OK || r->slot < 0)
        return;
    if (region_lock(r) != 0)
        return;
    struct vc_shared *sh = r->sh;
    if (r->slot >= 0) {
        struct vc_slot *s = &sh->slots[r->slot];
        uint64_t n = s->used[dev] < size ? s->used[dev] : size;
        s->used[dev] -= n;
        sh->total[dev] = sh->total[dev] > n ? sh->total[dev] - n : 0;
    }
    region_unlock(r);
}

int vc_region_used(struct vc_region *r, int dev, uint64_t *used)
{
    if (vc_region_open(r) != 0 || region_lock(r) != 0)
        return -1;
    reclaim_dead(r->sh, getpid());
    *used = r->sh->total[dev];
    region_unlock(r);
    return 0;
}

void vc_region_detach(struct vc_region *r)
{
    if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != VC_REGION_OK || r->slot < 0)
        return;
    if (region_lock(r) != 0)
        return;
    struct vc_slot *s = &r->sh->slots[r->slot];
    if (s->pid == getpid() && s->pidns == own_pidns())
        clear_slot(r->sh, s);
    r->slot = -1;
    region_unlock(r);
}

void vc_region_after_fork(struct vc_region *r)
{
    /* The child is a new process: it registers its own slot on first use. */
    r->slot = -1;
    pthread_mutex_init(&r->open_mu, NULL);
}

int vc_region_lock_for_test(struct vc_region *r)
{
    if (vc_region_open(r) != 0)
        return -1;
    return region_lock(r);
}
