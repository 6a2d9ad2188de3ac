/*
 * N processes (separate images: fork + exec) race for one quota.
 *   t_race N STATE_FILE   parent: start N workers, wait, check, print results
 * Phase 1: every worker allocates 64 MiB blocks until refused; together they must hold exactly
 * the quota. Phase 2: random allocate/free churn; a shared counter of bytes really held (raised
 * after a successful allocation, lowered before a free) must never pass the quota. At the end the
 * region must be empty again.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "cuda_api.h"

struct state {
    uint64_t limit;
    int32_t ready, filled, done;
    uint64_t held_blocks;
    uint64_t outstanding, max_outstanding;
    uint64_t granted, refused;
};

static struct state *map_state(const char *path, int create)
{
    int fd = open(path, O_RDWR | (create ? O_CREAT | O_TRUNC : 0), 0600);
    CHECK(fd >= 0);
    if (create)
        CHECK(ftruncate(fd, sizeof(struct state)) == 0);
    struct state *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(s != MAP_FAILED);
    close(fd);
    return s;
}

static void wait_all(int32_t *counter, int n)
{
    while (__atomic_load_n(counter, __ATOMIC_ACQUIRE) < n)
        sched_yield();
}

static void note_held(struct state *s, uint64_t size)
{
    uint64_t now = __atomic_add_fetch(&s->outstanding, size, __ATOMIC_SEQ_CST);
    uint64_t max = __atomic_load_n(&s->max_outstanding, __ATOMIC_SEQ_CST);
    while (now > max && !__atomic_compare_exchange_n(&s->max_outstanding, &max, now, 0, __ATOMIC_SEQ_CST,
                                                     __ATOMIC_SEQ_CST))
        ;
}

static int worker(int n, const char *path, unsigned seed)
{
    struct state *s = map_state(path, 0);
    test_context();
    __atomic_add_fetch(&s->ready, 1, __ATOMIC_SEQ_CST);
    wait_all(&s->ready, n);
    CUdeviceptr blocks[4096];
    int nb = 0;
    while (nb < 4096 && cuMemAlloc_v2(&blocks[nb], 64 * MiB) == CUDA_SUCCESS) {
        note_held(s, 64 * MiB);
        nb++;
    }
    __atomic_add_fetch(&s->held_blocks, (uint64_t)nb, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&s->filled, 1, __ATOMIC_SEQ_CST);
    wait_all(&s->filled, n);
    for (int i = 0; i < nb; i++) {
        __atomic_sub_fetch(&s->outstanding, 64 * MiB, __ATOMIC_SEQ_CST);
        CHECK_EQ(cuMemFree_v2(blocks[i]), CUDA_SUCCESS);
    }
    /* Churn: sizes 1..64 MiB, hold up to 16 at a time. */
    CUdeviceptr held[16];
    uint64_t sizes[16];
    int nh = 0;
    uint64_t granted = 0, refused = 0;
    for (int it = 0; it < 1500; it++) {
        seed = seed * 1103515245u + 12345u;
        if (nh == 16 || (nh > 0 && (seed >> 16) % 3 == 0)) {
            int k = (int)((seed >> 8) % (unsigned)nh);
            __atomic_sub_fetch(&s->outstanding, sizes[k], __ATOMIC_SEQ_CST);
            CHECK_EQ(cuMemFree_v2(held[k]), CUDA_SUCCESS);
            held[k] = held[nh - 1];
            sizes[k] = sizes[--nh];
            continue;
        }
        uint64_t size = (1 + (seed >> 10) % 64) * MiB;
        if (cuMemAlloc_v2(&held[nh], size) == CUDA_SUCCESS) {
            note_held(s, size);
            sizes[nh++] = size;
            granted++;
        } else {
            refused++;
        }
    }
    while (nh > 0) {
        nh--;
        __atomic_sub_fetch(&s->outstanding, sizes[nh], __ATOMIC_SEQ_CST);
        CHECK_EQ(cuMemFree_v2(held[nh]), CUDA_SUCCESS);
    }
    __atomic_add_fetch(&s->granted, granted, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&s->refused, refused, __ATOMIC_SEQ_CST);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 5 && strcmp(argv[1], "worker") == 0)
        return worker(atoi(argv[2]), argv[3], (unsigned)atoi(argv[4]));
    CHECK(argc == 3);
    int n = atoi(argv[1]);
    struct state *s = map_state(argv[2], 1);
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            char nb[16], seed[16];
            snprintf(nb, sizeof nb, "%d", n);
            snprintf(seed, sizeof seed, "%d", 7919 * (i + 1));
            execl("/proc/self/exe", argv[0], "worker", nb, argv[2], seed, (char *)NULL);
            _exit(127);
        }
    }
    int failed = 0, status;
    while (wait(&status) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed++;
    test_context();
    size_t f, t;
    CHECK_EQ(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
    printf("workers=%d failed=%d filled_mib=%llu max_outstanding_mib=%.1f granted=%llu refused=%llu "
           "total_mib=%zu free_mib_after=%zu\n",
           n, failed, (unsigned long long)(s->held_blocks * 64), (double)s->max_outstanding / MiB,
           (unsigned long long)s->granted, (unsigned long long)s->refused, t / MiB, f / MiB);
    return failed != 0;
}
