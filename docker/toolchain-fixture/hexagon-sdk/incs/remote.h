/* Stand-in for the Hexagon SDK's remote.h: FastRPC handles, buffers and the scalars word. */
#ifndef REMOTE_H
#define REMOTE_H
#include <stdint.h>
#include <stddef.h>

typedef uint64_t remote_handle64;

typedef struct {
    void  *pv;
    size_t nLen;
} remote_buf;

typedef union {
    remote_buf buf;
    remote_handle64 h64;
} remote_arg;

#define REMOTE_SCALARS_METHOD(sc)        (((sc) >> 24) & 0x1f)
#define REMOTE_SCALARS_INBUFS(sc)        (((sc) >> 16) & 0xff)
#define REMOTE_SCALARS_OUTBUFS(sc)       (((sc) >> 8) & 0xff)
#define REMOTE_SCALARS_MAKE(m, nin, nout) \
    ((((uint32_t)(m) & 0x1f) << 24) | (((uint32_t)(nin) & 0xff) << 16) | (((uint32_t)(nout) & 0xff) << 8))

int remote_handle64_open(const char *uri, remote_handle64 *h);
int remote_handle64_invoke(remote_handle64 h, uint32_t sc, remote_arg *pra);
int remote_handle64_close(remote_handle64 h);
#endif
