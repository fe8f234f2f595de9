/* hexbuild DSP runtime: the heap (malloc, free, memalign, ...), for the kernel harness and for the
 * virtual NPU, whose skel allocates and frees from several threads for as long as a session lives.
 *
 * Every block has a 128-byte header right below it, so every block is 128-byte aligned (what HVX
 * loads want) and free() knows where a block came from:
 *   - small blocks (up to 1 MiB with the header) come from power-of-two size classes carved out of
 *     4 MiB chunks; a freed block goes to its class's free list for the next request of that class;
 *   - larger blocks are mappings of their own, returned to the emulator by free().
 * One lock guards it all: the skel allocates outside its hot loops, so contention is rare.
 *
 * Every live block is also on a list, newest first, with a generation number: the harness takes a
 * mark before a test case and releases to it afterwards (hx_heap_mark/hx_heap_release), which
 * frees whatever the case allocated, even blocks an op forgot to free. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sys.h"

#define HDR        128u
#define MIN_SHIFT  8u                      /* the smallest slot: 256 bytes, header included */
#define MAX_SHIFT  20u                     /* the largest: 1 MiB */
#define N_CLASSES  (MAX_SHIFT - MIN_SHIFT + 1)
#define LARGE      0xffu
#define CHUNK      (4u << 20)
#define MAGIC      0x68786862u            /* "hxhb" */
#define PAGE       4096u

struct hx_block {
    uint32_t magic;
    uint32_t cls;                /* size class index, or LARGE */
    size_t size;                 /* what the caller asked for (realloc copies that much) */
    unsigned char *base;         /* the slot or mapping the block lives in */
    size_t span;                 /* its length */
    uint32_t gen;                /* allocation number, for hx_heap_release */
    struct hx_block *prev, *next;
};
_Static_assert(sizeof(struct hx_block) <= HDR, "the block header must fit below the block");

struct free_slot { struct free_slot *next; };

static hx_lock_t heap_lock = HX_LOCK_INIT;
static struct free_slot *free_lists[N_CLASSES];
static unsigned char *chunk_top, *chunk_end;
static struct hx_block *live;    /* newest first, so generations decrease along the list */
static uint32_t generation;

static void heap_fail(const char *msg) {
    hx_write(2, msg, strlen(msg));
    abort();
}

static uint32_t class_of(size_t need) {
    uint32_t c = 0;
    while (((size_t) 1 << (MIN_SHIFT + c)) < need) {
        c++;
    }
    return c;
}

/* A slot of class c, from its free list or carved from the current chunk (called locked). */
static unsigned char *take_slot(uint32_t c) {
    if (free_lists[c]) {
        struct free_slot *s = free_lists[c];
        free_lists[c] = s->next;
        return (unsigned char *) s;
    }
    size_t len = (size_t) 1 << (MIN_SHIFT + c);
    if (!chunk_top || (size_t) (chunk_end - chunk_top) < len) {
        /* the rest of the old chunk is left unused: under 1 MiB, and it keeps this simple */
        chunk_top = hx_mmap_anon(CHUNK);
        if (!chunk_top) {
            return NULL;
        }
        chunk_end = chunk_top + CHUNK;
    }
    unsigned char *p = chunk_top;
    chunk_top += len;
    return p;
}

static void unlink_block(struct hx_block *b) {
    if (b->prev) b->prev->next = b->next; else live = b->next;
    if (b->next) b->next->prev = b->prev;
}

/* Give a block's memory back (called locked). */
static void release_block(struct hx_block *b) {
    unlink_block(b);
    b->magic = 0;
    if (b->cls == LARGE) {
        hx_munmap(b->base, b->span);
    } else {
        struct free_slot *s = (struct free_slot *) b->base;
        s->next = free_lists[b->cls];
        free_lists[b->cls] = s;
    }
}

void *memalign(size_t align, size_t n) {
    if (align < HDR) {
        align = HDR;
    }
    if (align & (align - 1)) {
        return NULL;
    }
    /* room for the header and for moving the block up to the asked alignment */
    size_t need = n + HDR + (align - HDR);
    if (need < n) {
        return NULL;
    }
    uint32_t cls = LARGE;
    size_t span;
    unsigned char *base;
    if (need <= ((size_t) 1 << MAX_SHIFT)) {
        cls = class_of(need);
        span = (size_t) 1 << (MIN_SHIFT + cls);
        hx_lock(&heap_lock);
        base = take_slot(cls);
        hx_unlock(&heap_lock);
    } else {
        span = (need + PAGE - 1) & ~(size_t) (PAGE - 1);
        if (span < need) {
            return NULL;
        }
        base = hx_mmap_anon(span);
    }
    if (!base) {
        return NULL;
    }
    unsigned char *p = (unsigned char *) (((uintptr_t) base + HDR + align - 1) & ~(uintptr_t) (align - 1));
    struct hx_block *b = (struct hx_block *) (p - HDR);
    b->magic = MAGIC;
    b->cls = cls;
    b->size = n;
    b->base = base;
    b->span = span;
    b->prev = NULL;
    hx_lock(&heap_lock);
    b->gen = ++generation;
    b->next = live;
    if (live) live->prev = b;
    live = b;
    hx_unlock(&heap_lock);
    return p;
}

static struct hx_block *block_of(void *p) {
    struct hx_block *b = (struct hx_block *) ((unsigned char *) p - HDR);
    if (((uintptr_t) p & (HDR - 1)) || b->magic != MAGIC) {
        heap_fail("hexbuild dsp runtime: free() or realloc() of a pointer the heap did not give out\n");
    }
    return b;
}

void free(void *p) {
    if (!p) {
        return;
    }
    struct hx_block *b = block_of(p);
    hx_lock(&heap_lock);
    release_block(b);
    hx_unlock(&heap_lock);
}

void *malloc(size_t n) { return memalign(HDR, n); }

void *aligned_alloc(size_t align, size_t n) { return memalign(align, n); }

int posix_memalign(void **p, size_t align, size_t n) {
    *p = memalign(align, n);
    return *p ? 0 : 12;  /* ENOMEM */
}

void *calloc(size_t n, size_t size) {
    if (size && n > (size_t) -1 / size) {
        return NULL;
    }
    void *p = malloc(n * size);
    /* a block of its own mapping is fresh zero pages already */
    if (p && block_of(p)->cls != LARGE) {
        memset(p, 0, n * size);
    }
    return p;
}

void *realloc(void *old, size_t n) {
    if (!old) {
        return malloc(n);
    }
    struct hx_block *b = block_of(old);
    size_t room = b->span - (size_t) ((unsigned char *) old - b->base);
    if (n <= room && (b->cls != LARGE || n * 2 > room)) {
        b->size = n;  /* fits where it is (a large block that shrank a lot moves, to give memory back) */
        return old;
    }
    void *p = malloc(n);
    if (p) {
        memcpy(p, old, b->size < n ? b->size : n);
        free(old);
    }
    return p;
}

/* The harness's per-case lifetime: a mark is the generation reached so far. */
void *hx_heap_mark(void) {
    hx_lock(&heap_lock);
    uint32_t g = generation;
    hx_unlock(&heap_lock);
    return (void *) (uintptr_t) g;
}

void hx_heap_release(void *mark) {
    uint32_t g = (uint32_t) (uintptr_t) mark;
    hx_lock(&heap_lock);
    while (live && live->gen > g) {
        release_block(live);
    }
    hx_unlock(&heap_lock);
}
