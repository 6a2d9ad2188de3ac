/*
 * dlsym(handle, name): for RTLD_NEXT ((void *)-1) jump straight to the real dlsym so it sees the
 * caller's return address (RTLD_NEXT means "after the caller's object"); everything else goes to
 * vcore_dlsym_slow in hooks.c. The real pointer is set by the load-time constructor.
 */
#if !defined(VCORE_NO_DLSYM_HOOK)
#if defined(__x86_64__)
    .text
    .globl dlsym
    .type dlsym, @function
    .hidden vcore_real_dlsym_ptr
    .hidden vcore_dlsym_slow
dlsym:
#if defined(__CET__)
    endbr64
#endif
    cmpq $-1, %rdi
    jne 1f
    movq vcore_real_dlsym_ptr(%rip), %rax
    testq %rax, %rax
    je 1f
    jmp *%rax
1:
    jmp vcore_dlsym_slow
    .size dlsym, .-dlsym
#elif defined(__aarch64__)
    .text
    .globl dlsym
    .type dlsym, %function
    .hidden vcore_real_dlsym_ptr
    .hidden vcore_dlsym_slow
    .p2align 2
dlsym:
#if defined(__ARM_FEATURE_BTI_DEFAULT)
    hint #34
#endif
    cmn x0, #1
    b.ne 1f
    adrp x16, vcore_real_dlsym_ptr
    ldr x16, [x16, #:lo12:vcore_real_dlsym_ptr]
    cbz x16, 1f
    br x16
1:
    b vcore_dlsym_slow
    .size dlsym, .-dlsym
#endif
#endif
#if defined(__linux__) && defined(__ELF__)
    .section .note.GNU-stack,"",%progbits
#endif
