/* The Hexagon C library's <assert.h>, declared from the C library's public API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#undef assert
#ifdef NDEBUG
#define assert(e) ((void) 0)
#else
#ifdef __cplusplus
extern "C"
#endif
void __assert_fail(const char *expr, const char *file, unsigned int line, const char *func) __attribute__((noreturn));
#define assert(e) ((e) ? (void) 0 : __assert_fail(#e, __FILE__, __LINE__, __func__))
#endif
#if !defined(__cplusplus) && !defined(static_assert)
#define static_assert _Static_assert
#endif
