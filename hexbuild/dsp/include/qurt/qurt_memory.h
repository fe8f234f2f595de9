/* QuRT cache maintenance, declared from the public QuRT API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef QURT_MEMORY_H
#define QURT_MEMORY_H
#include <stddef.h>
#include <stdint.h>
typedef unsigned int qurt_addr_t;
typedef unsigned int qurt_size_t;
typedef enum {
    QURT_MEM_CACHE_FLUSH, QURT_MEM_CACHE_INVALIDATE, QURT_MEM_CACHE_FLUSH_INVALIDATE,
    QURT_MEM_CACHE_FLUSH_ALL, QURT_MEM_CACHE_FLUSH_INVALIDATE_ALL, QURT_MEM_CACHE_TABLE_FLUSH_INVALIDATE,
    QURT_MEM_CACHE_FLUSH_INVALIDATE_L2,
} qurt_mem_cache_op_t;
typedef enum { QURT_MEM_ICACHE, QURT_MEM_DCACHE } qurt_mem_cache_type_t;
#ifdef __cplusplus
extern "C" {
#endif
int qurt_mem_cache_clean(qurt_addr_t addr, qurt_size_t size, qurt_mem_cache_op_t opcode, qurt_mem_cache_type_t type);
#ifdef __cplusplus
}
#endif
#endif /* QURT_MEMORY_H */
