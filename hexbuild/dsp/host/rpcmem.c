/* hexbuild's stand-in libcdsprpc.so: rpcmem. A block is a memfd mapped MAP_SHARED: its fd is the
 * buffer's name everywhere (fastrpc_mmap, dspqueue buffers, the skel's own calls), and the DSP
 * process maps the same pages when the fd reaches it. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vnpu_host.h"

struct block {
    struct block *next;
    void *base;
    size_t size;
    int fd;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct block *g_blocks;

VNPU_API void rpcmem_init(void) {}
VNPU_API void rpcmem_deinit(void) {}

VNPU_API void *rpcmem_alloc2(int heapid, uint32_t flags, size_t size) {
    (void) heapid; /* every heap is system memory here; cached or not makes no difference */
    (void) flags;
    if (size == 0) return NULL;
    /* CLOEXEC: the fd reaches a DSP process through SCM_RIGHTS only, never by inheritance. */
    int fd = memfd_create("rpcmem", MFD_CLOEXEC);
    if (fd < 0) {
        vnpu_say("rpcmem_alloc of %zu bytes: memfd_create failed: %s", size, strerror(errno));
        return NULL;
    }
    if (ftruncate(fd, (off_t) size) != 0) {
        vnpu_say("rpcmem_alloc of %zu bytes: %s", size, strerror(errno));
        close(fd);
        return NULL;
    }
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        vnpu_say("rpcmem_alloc of %zu bytes: mmap failed: %s", size, strerror(errno));
        close(fd);
        return NULL;
    }
    struct block *b = malloc(sizeof *b);
    if (!b) {
        munmap(base, size);
        close(fd);
        return NULL;
    }
    b->base = base;
    b->size = size;
    b->fd = fd;
    pthread_mutex_lock(&g_mu);
    b->next = g_blocks;
    g_blocks = b;
    pthread_mutex_unlock(&g_mu);
    vnpu_trace("rpcmem_alloc %zu bytes: fd %d at %p", size, fd, base);
    return base;
}

VNPU_API void *rpcmem_alloc(int heapid, uint32_t flags, int size) {
    if (size <= 0) return NULL;
    return rpcmem_alloc2(heapid, flags, (size_t) size);
}

VNPU_API void rpcmem_free(void *po) {
    if (!po) return;
    pthread_mutex_lock(&g_mu);
    struct block **pp = &g_blocks, *b = NULL;
    for (; *pp; pp = &(*pp)->next) {
        if ((*pp)->base == po) {
            b = *pp;
            *pp = b->next;
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
    if (!b) {
        static int said;
        vnpu_say_once(said, "rpcmem_free of %p, which rpcmem_alloc did not return: ignored", po);
        return;
    }
    /* A DSP process that still maps the fd keeps its own reference to the pages; its record of the
     * fd number is dropped so that a new block that reuses the number is not mistaken for this. */
    for (int ed = 0; ed < VNPU_NUM_EDOMAINS; ed++) {
        struct vnpu_session *s = vnpu_session_get(ed);
        pthread_mutex_lock(&s->mu);
        bool mapped = vnpu_map_find_locked(s, b->fd) != NULL;
        pthread_mutex_unlock(&s->mu);
        if (mapped) fastrpc_munmap(ed, b->fd, NULL, 0);
    }
    munmap(b->base, b->size);
    close(b->fd);
    vnpu_trace("rpcmem_free fd %d", b->fd);
    free(b);
}

VNPU_API int rpcmem_to_fd(void *po) {
    int fd = -1;
    pthread_mutex_lock(&g_mu);
    for (struct block *b = g_blocks; b; b = b->next) {
        if ((uint8_t *) po >= (uint8_t *) b->base && (uint8_t *) po < (uint8_t *) b->base + b->size) {
            fd = b->fd;
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return fd;
}

bool vnpu_rpcmem_lookup(int fd, void **base, size_t *size) {
    bool found = false;
    pthread_mutex_lock(&g_mu);
    for (struct block *b = g_blocks; b; b = b->next) {
        if (b->fd == fd) {
            *base = b->base;
            *size = b->size;
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return found;
}
