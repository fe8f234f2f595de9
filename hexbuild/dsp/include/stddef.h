/* The Hexagon C library's <stddef.h>: clang's, with NULL as a plain 0 as the target's C library has it
 * (llama.cpp's skel stores NULL in a uint64_t).
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#include_next <stddef.h>
#if !defined(__cplusplus)
#undef NULL
#define NULL 0
#endif
