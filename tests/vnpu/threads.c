/* A Hexagon test program for the virtual NPU runtime's threads, futexes and heap, linked with the
 * runtime (hexbuild/dsp/runtime and vnpu/qurt.c) and run under qemu-hexagon: threads made with
 * qurt_thread_create allocate, check and free blocks of every size class at once, count under a
 * lock made of qurt_futex_wait/wake (a lost wake-up hangs, a lost update miscounts), end with
 * qurt_thread_exit and are joined for their status. Then the heap must give freed memory back
 * (a freed block is the next one of its class; a mark and release frees what came after it).
 * Prints one line per check; exit 0 when all hold. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qurt.h>

void *hx_heap_mark(void);
void hx_heap_release(void *mark);

#define N_THREADS 6
#define ROUNDS 400
#define LIVE 12

static volatile int lock_word;  /* 0 free, 1 taken, 2 taken with waiters */
static volatile unsigned counter;
static volatile unsigned expected;  /* the increments made, counted atomically */
static volatile int failures;

static void take(void) {
    int c = 0;
    if (__atomic_compare_exchange_n(&lock_word, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
    if (c != 2) c = __atomic_exchange_n(&lock_word, 2, __ATOMIC_ACQUIRE);
    while (c) {
        qurt_futex_wait((void *) &lock_word, 2);
        c = __atomic_exchange_n(&lock_word, 2, __ATOMIC_ACQUIRE);
    }
}

static void give(void) {
    if (__atomic_exchange_n(&lock_word, 0, __ATOMIC_RELEASE) != 1) qurt_futex_wake((void *) &lock_word, 1);
}

static uint32_t next_rand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static void check(const unsigned char *p, size_t n, unsigned char v, const char *what) {
    for (size_t i = 0; i < n; i += 61) {
        if (p[i] != v) {
            printf("FAIL %s: byte %u is %u, not %u\n", what, (unsigned) i, p[i], v);
            __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
            return;
        }
    }
}

static void worker(void *arg) {
    unsigned id = (unsigned) (uintptr_t) arg;
    uint32_t seed = id * 7919u + 1;
    unsigned char *blocks[LIVE] = { 0 };
    size_t sizes[LIVE] = { 0 };
    for (int r = 0; r < ROUNDS; r++) {
        int k = (int) (next_rand(&seed) % LIVE);
        unsigned char v = (unsigned char) (id * 31 + (unsigned) k);
        if (blocks[k]) {
            check(blocks[k], sizes[k], v, "a block another thread's allocation overwrote");
            if (r % 3 == 0) {  /* grow or shrink in place or by a move, keeping the contents */
                size_t n = sizes[k] / 2 + next_rand(&seed) % 3000;
                blocks[k] = realloc(blocks[k], n);
                check(blocks[k], n < sizes[k] ? n : sizes[k], v, "realloc's copy");
                memset(blocks[k], v, n);
                sizes[k] = n;
                continue;
            }
            free(blocks[k]);
            blocks[k] = NULL;
        }
        uint32_t pick = next_rand(&seed) % 100;
        size_t n = pick < 70 ? 1 + next_rand(&seed) % 2000 : pick < 97 ? next_rand(&seed) % 400000 : (2u << 20) + 4096;
        blocks[k] = r % 5 ? malloc(n) : memalign(4096, n);
        if (!blocks[k] || (r % 5 == 0 && ((uintptr_t) blocks[k] & 4095)) || ((uintptr_t) blocks[k] & 127)) {
            printf("FAIL thread %u: a block of %u bytes is %p\n", id, (unsigned) n, (void *) blocks[k]);
            __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
            break;
        }
        memset(blocks[k], v, n);
        sizes[k] = n;
        take();
        unsigned c = counter;  /* a read-modify-write the lock must make whole */
        if (r % 7 == 0) qurt_sleep(50);
        counter = c + 1;
        give();
        __atomic_fetch_add(&expected, 1, __ATOMIC_RELAXED);
    }
    for (int k = 0; k < LIVE; k++) free(blocks[k]);
    qurt_thread_exit((int) id + 100);
}

int main(void) {
    qurt_thread_t tids[N_THREADS];
    void *stacks[N_THREADS] = { 0 };
    for (unsigned i = 0; i < N_THREADS; i++) {
        qurt_thread_attr_t attr;
        qurt_thread_attr_init(&attr);
        qurt_thread_attr_set_name(&attr, "stress");
        if (i % 2) {  /* a stack of the caller's, as the skel's worker pool gives */
            stacks[i] = malloc(32768);
            qurt_thread_attr_set_stack_addr(&attr, stacks[i]);
            qurt_thread_attr_set_stack_size(&attr, 32768);
        }
        if (qurt_thread_create(&tids[i], &attr, worker, (void *) (uintptr_t) i)) {
            printf("FAIL qurt_thread_create %u\n", i);
            return 1;
        }
    }
    int distinct = 1;
    for (unsigned i = 0; i < N_THREADS; i++) {
        for (unsigned j = 0; j < i; j++) distinct &= tids[i] != tids[j];
        distinct &= tids[i] != qurt_thread_get_id();
    }
    printf("%s thread ids distinct\n", distinct ? "ok" : "FAIL");
    int statuses = 1;
    for (unsigned i = 0; i < N_THREADS; i++) {
        int st = -1;
        if (qurt_thread_join(tids[i], &st) || st != (int) i + 100) statuses = 0;
        free(stacks[i]);
    }
    printf("%s joined, exit statuses kept\n", statuses ? "ok" : "FAIL");
    printf("%s counter %u of %u\n", counter == expected ? "ok" : "FAIL", counter, expected);
    printf("%s blocks intact (%d failures)\n", failures ? "FAIL" : "ok", failures);

    void *a = malloc(1000);
    free(a);
    void *b = malloc(900);
    printf("%s a freed block is reused\n", a == b ? "ok" : "FAIL");
    free(b);
    void *mark = hx_heap_mark();
    void *small = malloc(5000), *large = malloc(8u << 20);
    hx_heap_release(mark);
    void *again = malloc(5000);
    printf("%s release frees what came after the mark (%s)\n", again == small && large ? "ok" : "FAIL",
           again == small ? "same block" : "another block");
    int ok = distinct && statuses && counter == expected && !failures && a == b && again == small;
    return ok ? 0 : 1;
}
