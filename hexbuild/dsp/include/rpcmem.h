/* Shared (ION/DMA-BUF) memory for FastRPC, declared from the public FastRPC API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef RPCMEM_H
#define RPCMEM_H
#include <stddef.h>
#include <stdint.h>

#define RPCMEM_HEAP_ID_SYSTEM     25
#define RPCMEM_HEAP_ID_CONTIG     22
#define RPCMEM_HEAP_ID_SECURE     9
#define RPCMEM_DEFAULT_HEAP       -1
#define RPCMEM_DEFAULT_FLAGS      1
#define RPCMEM_FLAG_UNCACHED      0
#define RPCMEM_FLAG_CACHED        RPCMEM_DEFAULT_FLAGS
#define RPCMEM_HEAP_UNCACHED      0x80000000
#define RPCMEM_HEAP_NOREG         0x40000000
#define RPCMEM_HEAP_NONCOHERENT   0x20000000

#ifdef __cplusplus
extern "C" {
#endif
void rpcmem_init(void);
void rpcmem_deinit(void);
void *rpcmem_alloc(int heapid, uint32_t flags, int size);
void *rpcmem_alloc2(int heapid, uint32_t flags, size_t size);
void rpcmem_free(void *po);
int rpcmem_to_fd(void *po);
#ifdef __cplusplus
}
#endif
#endif /* RPCMEM_H */
