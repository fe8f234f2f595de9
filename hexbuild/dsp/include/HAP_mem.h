/* DSP memory maps of host buffers (HAP_mmap) and memory requests, declared from the public SDK API.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef HAP_MEM_H
#define HAP_MEM_H
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HAP_PROT_NONE  0x00
#define HAP_PROT_READ  0x01
#define HAP_PROT_WRITE 0x02
#define HAP_PROT_EXEC  0x04
#define HAP_MEM_CACHE_WRITEBACK    (0x10)
#define HAP_MEM_CACHE_NON_SHARED   (0x20)
#define HAP_MEM_CACHE_WRITETHROUGH (0x40)
#define HAP_MEM_FLAGS_SKIP_DSP_MAP 0x80
#define HAP_MEM_FLAGS_DSP_MAP      0x100
#define HAP_MEM_FLAGS_EXTENDED_MAP 0x200

typedef enum { HAP_MEM_LOG_BLOCKS, HAP_MEM_SET_GROW_SIZE, HAP_MEM_MAP, HAP_MEM_UNMAP } HAP_mem_req_t;
typedef struct { uint64_t addr; uint64_t size; uint32_t prot; uint32_t flags; int fd; int dsp_pa;
                 uint64_t offset; void *vaddr; } HAP_mem_map_t;
typedef struct { uint64_t addr; uint64_t size; void *vaddr; } HAP_mem_unmap_t;
typedef struct { uint64_t min_grow_size; uint64_t max_grow_size; } HAP_mem_grow_size_t;
typedef struct {
    HAP_mem_req_t type;
    union {
        HAP_mem_grow_size_t mem_grow_size;
        HAP_mem_map_t map;
        HAP_mem_unmap_t unmap;
    };
} HAP_mem_req_payload_t;

#ifdef __cplusplus
extern "C" {
#endif
void *HAP_mmap(void *addr, int len, int prot, int flags, int fd, long offset);
int HAP_munmap(void *addr, int len);
void *HAP_mmap2(void *addr, size_t len, int prot, int flags, int fd, long offset);
int HAP_munmap2(void *addr, size_t len);
int HAP_mmap_get(int fd, void **vaddr, uint64_t *paddr);
int HAP_mmap_put(int fd);
int HAP_mem_request(HAP_mem_req_payload_t *request);
#ifdef __cplusplus
}
#endif
#endif /* HAP_MEM_H */
