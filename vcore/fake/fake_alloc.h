/*
 * Allocation bookkeeping shared by the fake runtimes: no device, only numbers. Each allocation gets
 * an id; its "device address" is derived from the id, so frees are O(1) and addresses are unique.
 * Physical memory per device is VCORE_FAKE_TOTAL_MIB (default 21525, Lab 20's 310P card).
 */
#ifndef FAKE_ALLOC_H
#define FAKE_ALLOC_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define FAKE_BASE 0x100000000000ULL
#define FAKE_STRIDE 0x1000ULL
#define FAKE_MAX_DEV 128

static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *fake_size;  /* id -> size, 0 when free */
static int *fake_dev;        /* id -> device */
static uint32_t *fake_free;  /* stack of free ids */
static uint32_t fake_nfree, fake_cap;
static uint64_t fake_used[FAKE_MAX_DEV];

static inline uint64_t fake_total_bytes(void)
{
    const char *env = getenv("VCORE_FAKE_TOTAL_MIB");
    uint64_t mib = env != NULL ? strtoull(env, NULL, 10) : 21525;
    return mib << 20;
}

static inline int fake_device_count(void)
{
    const char *env = getenv("VCORE_FAKE_DEVICES");
    int n = env != NULL ? atoi(env) : 1;
    return n < 1 ? 1 : (n > FAKE_MAX_DEV ? FAKE_MAX_DEV : n);
}

static inline int fake_grow(void)
{
    uint32_t ncap = fake_cap ? fake_cap * 2 : 1024;
    uint64_t *ns = realloc(fake_size, ncap * sizeof *ns);
    if (ns == NULL)
        return -1;
    fake_size = ns;
    int *nd = realloc(fake_dev, ncap * sizeof *nd);
    if (nd == NULL)
        return -1;
    fake_dev = nd;
    uint32_t *nf = realloc(fake_free, ncap * sizeof *nf);
    if (nf == NULL)
        return -1;
    fake_free = nf;
    for (uint32_t id = ncap - 1; id >= fake_cap && id > 0; id--) {
        fake_size[id] = 0;
        fake_free[fake_nfree++] = id;
    }
    if (fake_cap == 0)
        fake_size[0] = 0;
    fake_cap = ncap;
    return 0;
}

/* 0 on success, 1 when the fake device is full, -1 on host memory exhaustion. */
static inline int fake_alloc(int dev, uint64_t size, uint64_t *addr)
{
    pthread_mutex_lock(&fake_mu);
    if (dev < 0 || dev >= FAKE_MAX_DEV || fake_used[dev] + size > fake_total_bytes()) {
        pthread_mutex_unlock(&fake_mu);
        return 1;
    }
    if (fake_nfree == 0 && fake_grow() != 0) {
        pthread_mutex_unlock(&fake_mu);
        return -1;
    }
    uint32_t id = fake_free[--fake_nfree];
    fake_size[id] = size;
    fake_dev[id] = dev;
    fake_used[dev] += size;
    pthread_mutex_unlock(&fake_mu);
    *addr = FAKE_BASE + (uint64_t)id * FAKE_STRIDE;
    return 0;
}

/* 0 on success, -1 for an address the fake never handed out. */
static inline int fake_release(uint64_t addr)
{
    if (addr < FAKE_BASE || (addr - FAKE_BASE) % FAKE_STRIDE != 0)
        return -1;
    uint64_t id = (addr - FAKE_BASE) / FAKE_STRIDE;
    pthread_mutex_lock(&fake_mu);
    if (id == 0 || id >= fake_cap || fake_size[id] == 0) {
        pthread_mutex_unlock(&fake_mu);
        return -1;
    }
    fake_used[fake_dev[id]] -= fake_size[id];
    fake_size[id] = 0;
    fake_free[fake_nfree++] = (uint32_t)id;
    pthread_mutex_unlock(&fake_mu);
    return 0;
}

static inline uint64_t fake_used_on(int dev)
{
    pthread_mutex_lock(&fake_mu);
    uint64_t u = dev >= 0 && dev < FAKE_MAX_DEV ? fake_used[dev] : 0;
    pthread_mutex_unlock(&fake_mu);
    return u;
}

#endif
