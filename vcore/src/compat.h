/*
 * Bind glibc references to the oldest symbol versions so the library loads on hosts with glibc
 * 2.17 or newer, even when built on a much newer glibc. Since glibc 2.34 the dl* and pthread
 * functions live in libc.so.6 under new versions (for instance dlopen@GLIBC_2.34); the old
 * versions are still exported for compatibility, so naming them here changes nothing on new hosts
 * and keeps old hosts (where they live in libdl.so.2 / libpthread.so.0) working. The link adds
 * those two libraries as DT_NEEDED for the same reason. The test suite checks the result with
 * objdump -T. Included before every library source file by the Makefile.
 */
#ifndef VCORE_COMPAT_H
#define VCORE_COMPAT_H

#if defined(__x86_64__)
#define VC_GLIBC_BASE "GLIBC_2.2.5"
#define VC_GLIBC_ROBUST "GLIBC_2.12"
#elif defined(__aarch64__)
#define VC_GLIBC_BASE "GLIBC_2.17"
#define VC_GLIBC_ROBUST "GLIBC_2.17"
#endif

#if defined(VC_GLIBC_BASE) && !defined(VCORE_NO_SYMVER)
#define VC_SYMVER(sym, ver) __asm__(".symver " #sym "," #sym "@" ver)
VC_SYMVER(dlopen, VC_GLIBC_BASE);
VC_SYMVER(dlvsym, VC_GLIBC_BASE);
VC_SYMVER(dlerror, VC_GLIBC_BASE);
VC_SYMVER(dlclose, VC_GLIBC_BASE);
VC_SYMVER(dladdr, VC_GLIBC_BASE);
VC_SYMVER(pthread_mutexattr_setpshared, VC_GLIBC_BASE);
VC_SYMVER(pthread_mutexattr_setrobust, VC_GLIBC_ROBUST);
VC_SYMVER(pthread_mutex_consistent, VC_GLIBC_ROBUST);
VC_SYMVER(pthread_once, VC_GLIBC_BASE);
VC_SYMVER(pthread_key_create, VC_GLIBC_BASE);
VC_SYMVER(pthread_mutexattr_init, VC_GLIBC_BASE);
VC_SYMVER(pthread_mutexattr_destroy, VC_GLIBC_BASE);
#ifdef VC_COMPAT_DLSYM /* only for programs that call dlsym without defining it */
VC_SYMVER(dlsym, VC_GLIBC_BASE);
#endif
#endif

#endif
