/* hexbuild DSP runtime: the C library's <inttypes.h> (ILP32: long is 32 bits). */
#ifndef _INTTYPES_H
#define _INTTYPES_H
#include <stdint.h>
#define PRId32 "d"
#define PRIi32 "i"
#define PRIu32 "u"
#define PRIx32 "x"
#define PRIX32 "X"
#define PRId64 "lld"
#define PRIi64 "lli"
#define PRIu64 "llu"
#define PRIx64 "llx"
#define PRIX64 "llX"
#define PRIuPTR "u"
#define PRIxPTR "x"
#endif
