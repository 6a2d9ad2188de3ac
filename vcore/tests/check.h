/* Tiny self-checking helpers for the C test programs: a failed check prints where and exits 1. */
#ifndef VCORE_TEST_CHECK_H
#define VCORE_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define MiB ((size_t)1024 * 1024)

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "CHECK FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#define CHECK_EQ(a, b)                                                                 \
    do {                                                                               \
        long long va_ = (long long)(a), vb_ = (long long)(b);                          \
        if (va_ != vb_) {                                                              \
            fprintf(stderr, "CHECK FAILED %s:%d: %s == %s (%lld != %lld)\n", __FILE__, \
                    __LINE__, #a, #b, va_, vb_);                                       \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#endif
