/* hexbuild virtual NPU: the host's shared buffers in the DSP process. The host sends each rpcmem
 * buffer's memfd with an MMAP message; it is mapped here once (MAP_SHARED: the host and the DSP see
 * the same pages, as ION/DMA-BUF buffers on a phone) and named by the host's own fd number, which
 * is what llama.cpp passes around (op batches, dspqueue buffers, htp_iface_mmap). */
#include <stdint.h>
#include <stdlib.h>

#include <AEEStdErr.h>

#include "../runtime/sys.h"
#include "vnpu.h"

#define PAGE 4096u

struct map {
    int32_t host_fd;
    unsigned char *addr;   /* where offset 0 of the host's range is */
    uint64_t size;
    unsigned char *base;   /* the mapping itself (page-aligned at or below addr) */
    size_t span;
    struct map *next;
};

static hx_lock_t maps_lock = HX_LOCK_INIT;
static struct map *maps;

static struct map *find_locked(int32_t host_fd) {
    for (struct map *m = maps; m; m = m->next) {
        if (m->host_fd == host_fd) return m;
    }
    return NULL;
}

static void drop(struct map *m) {
    hx_munmap(m->base, m->span);
    free(m);
}

int vnpu_map_add(int host_fd, int local_fd, uint64_t offset, uint64_t size, uint32_t *dsp_addr) {
    /* the DSP has a 32-bit address space: a range beyond it cannot be mapped, as on a phone */
    uint64_t lead = offset & (PAGE - 1);
    uint64_t span = (lead + size + PAGE - 1) & ~(uint64_t) (PAGE - 1);
    if (size == 0 || span > 0xfffff000u || (offset - lead) / PAGE > 0xffffffffu) {
        hx_close(local_fd);
        return AEE_EBADPARM;
    }
    unsigned char *base = hx_mmap((size_t) span, HX_PROT_RW, HX_MAP_SHARED, local_fd, (uint32_t) ((offset - lead) / PAGE));
    hx_close(local_fd);  /* the mapping keeps the memory; the fd number is not needed */
    if (!base) {
        return AEE_ENOMEMORY;
    }
    struct map *m = malloc(sizeof *m);
    if (!m) {
        hx_munmap(base, (size_t) span);
        return AEE_ENOMEMORY;
    }
    m->host_fd = host_fd;
    m->base = base;
    m->span = (size_t) span;
    m->addr = base + lead;
    m->size = size;
    hx_lock(&maps_lock);
    /* The host maps an fd once; the same number again means it closed the old buffer without an
     * MUNMAP and the number was reused: the new buffer replaces the old. */
    struct map *old = NULL;
    for (struct map **p = &maps; *p; p = &(*p)->next) {
        if ((*p)->host_fd == host_fd) {
            old = *p;
            *p = old->next;
            break;
        }
    }
    m->next = maps;
    maps = m;
    hx_unlock(&maps_lock);
    if (old) {
        VNPU_TRACE("MMAP: host fd %d mapped again: the old mapping is dropped", host_fd);
        drop(old);
    }
    *dsp_addr = (uint32_t) (uintptr_t) m->addr;
    return AEE_SUCCESS;
}

int vnpu_map_remove(int host_fd) {
    hx_lock(&maps_lock);
    struct map *m = NULL;
    for (struct map **p = &maps; *p; p = &(*p)->next) {
        if ((*p)->host_fd == host_fd) {
            m = *p;
            *p = m->next;
            break;
        }
    }
    hx_unlock(&maps_lock);
    if (!m) {
        return AEE_ENOSUCHMAP;
    }
    drop(m);
    return AEE_SUCCESS;
}

void *vnpu_map_addr(int host_fd, uint64_t offset, uint64_t size) {
    hx_lock(&maps_lock);
    struct map *m = find_locked(host_fd);
    void *p = m && offset <= m->size && size <= m->size - offset ? m->addr + offset : NULL;
    hx_unlock(&maps_lock);
    return p;
}

int vnpu_map_find(const void *p, int32_t *host_fd, uint32_t *offset) {
    const unsigned char *c = p;
    int r = -1;
    hx_lock(&maps_lock);
    for (struct map *m = maps; m; m = m->next) {
        if (c >= m->addr && (uint64_t) (c - m->addr) < m->size) {
            *host_fd = m->host_fd;
            *offset = (uint32_t) (c - m->addr);
            r = 0;
            break;
        }
    }
    hx_unlock(&maps_lock);
    return r;
}
