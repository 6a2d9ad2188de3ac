/*
 * Per-process map from an allocation's address (or VMM handle) to its size and device, so a free
 * releases exactly what its allocation reserved. Open addressing with linear probing and
 * backward-shift deletion; one mutex, held for a few dozen instructions.
 */
#include <stdlib.h>
#include <string.h>

#include "vcore.h"

static size_t slot_of(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

static int grow(struct vc_map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 256;
    struct vc_map_entry *nt = calloc(ncap, sizeof *nt);
    if (nt == NULL)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->tab[i].full)
            continue;
        size_t j = slot_of(m->tab[i].key, ncap);
        while (nt[j].full)
            j = (j + 1) & (ncap - 1);
        nt[j] = m->tab[i];
    }
    free(m->tab);
    m->tab = nt;
    m->cap = ncap;
    return 0;
}

int vc_map_put(struct vc_map *m, uint64_t key, uint64_t size, int dev)
{
    pthread_mutex_lock(&m->mu);
    if ((m->count + 1) * 2 > m->cap && grow(m) != 0) {
        pthread_mutex_unlock(&m->mu);
        return -1;
    }
    size_t i = slot_of(key, m->cap);
    while (m->tab[i].full && m->tab[i].key != key)
        i = (i + 1) & (m->cap - 1);
    if (!m->tab[i].full)
        m->count++;
    m->tab[i] = (struct vc_map_entry){key, size, dev, 1};
    pthread_mutex_unlock(&m->mu);
    return 0;
}

int vc_map_take(struct vc_map *m, uint64_t key, uint64_t *size, int *dev)
{
    pthread_mutex_lock(&m->mu);
    if (m->cap == 0) {
        pthread_mutex_unlock(&m->mu);
        return 0;
    }
    size_t mask = m->cap - 1;
    size_t i = slot_of(key, m->cap);
    while (m->tab[i].full && m->tab[i].key != key)
        i = (i + 1) & mask;
    if (!m->tab[i].full) {
        pthread_mutex_unlock(&m->mu);
        return 0;
    }
    *size = m->tab[i].size;
    *dev = m->tab[i].dev;
    /* Backward-shift deletion keeps every probe chain unbroken without tombstones. */
    size_t hole = i;
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->tab[j].full)
            break;
        size_t home = slot_of(m->tab[j].key, m->cap);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->tab[hole] = m->tab[j];
            hole = j;
        }
    }
    m->tab[hole].full = 0;
    m->count--;
    pthread_mutex_unlock(&m->mu);
    return 1;
}

void vc_map_fork_prepare(struct vc_map *m) { pthread_mutex_lock(&m->mu); }
void vc_map_fork_parent(struct vc_map *m) { pthread_mutex_unlock(&m->mu); }

void vc_map_fork_child(struct vc_map *m)
{
    /* The child has no device allocations of its own: start empty. */
    pthread_mutex_init(&m->mu, NULL);
    if (m->tab != NULL)
        memset(m->tab, 0, m->cap * sizeof *m->tab);
    m->count = 0;
}
