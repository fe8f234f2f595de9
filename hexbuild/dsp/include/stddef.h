/* hexbuild DSP runtime: the C library's <stddef.h>: clang's, with NULL as a plain 0
 * as the target's C library has it (llama.cpp's skel stores NULL in a uint64_t). */
#include_next <stddef.h>
#if !defined(__cplusplus)
#undef NULL
#define NULL 0
#endif
