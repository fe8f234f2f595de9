/* hexbuild virtual NPU: the DSP side of dspqueue, the asynchronous packet queue between the host
 * and the skel (llama.cpp's op batches and their responses travel on it, not on FastRPC calls).
 *
 * The host creates a queue (QUEUE_OPEN with its id), the skel imports it by id inside a FastRPC
 * call (dspqueue_import in htp_iface_start). Host packets arrive on the socket, read by the main
 * thread, which appends them here; each imported queue has a thread of its own that calls the
 * skel's packet callback whenever packets wait, as the DSP's dspqueue does. The skel reads them
 * with dspqueue_read_noblock and answers with dspqueue_write, which sends a DSP -> host packet.
 * A queue lives until both sides closed it (the host's QUEUE_CLOSE, the skel's dspqueue_close). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <AEEStdErr.h>
#include <HAP_perf.h>
#include <dspqueue.h>
#include <qurt.h>

#include "../runtime/sys.h"
#include "vnpu.h"
#include "wire.h"

struct packet {
    struct packet *next;
    uint32_t flags, n_bufs, msg_len;
    struct dspqueue_buffer *bufs;  /* in the same block, after the struct */
    uint8_t *msg;
};

struct dspqueue {
    uint64_t id;
    int host_open, imported;
    volatile int stopping;
    dspqueue_callback_t packet_cb, error_cb;
    void *ctx;
    qurt_thread_t thread;
    hx_lock_t lock;                /* the packet list, the counters */
    struct packet *head, *tail;
    uint32_t n_waiting;
    volatile int signal;           /* bumped on every arrival (and to stop): the thread waits on it */
    uint64_t n_read, bytes_read, n_written, bytes_written;
    struct dspqueue *next;
};

static hx_lock_t queues_lock = HX_LOCK_INIT;
static struct dspqueue *queues;

static struct dspqueue *find_locked(uint64_t id) {
    for (struct dspqueue *q = queues; q; q = q->next) {
        if (q->id == id) return q;
    }
    return NULL;
}

/* Drop a queue no side uses any more (queues_lock held). */
static void forget_locked(struct dspqueue *q) {
    if (q->host_open || q->imported) return;
    for (struct dspqueue **p = &queues; *p; p = &(*p)->next) {
        if (*p == q) {
            *p = q->next;
            break;
        }
    }
    for (struct packet *k = q->head, *n; k; k = n) {
        n = k->next;
        free(k);
    }
    free(q);
}

int vnpu_queue_open(uint64_t id) {
    hx_lock(&queues_lock);
    int status = AEE_SUCCESS;
    if (find_locked(id)) {
        status = AEE_EALREADY;
    } else {
        struct dspqueue *q = calloc(1, sizeof *q);
        if (!q) {
            status = AEE_ENOMEMORY;
        } else {
            q->id = id;
            q->host_open = 1;
            q->next = queues;
            queues = q;
        }
    }
    hx_unlock(&queues_lock);
    return status;
}

int vnpu_queue_close(uint64_t id) {
    hx_lock(&queues_lock);
    struct dspqueue *q = find_locked(id);
    int status = q && q->host_open ? AEE_SUCCESS : AEE_EBADITEM;
    if (status == AEE_SUCCESS) {
        q->host_open = 0;
        forget_locked(q);
    }
    hx_unlock(&queues_lock);
    return status;
}

static void wake(struct dspqueue *q) {
    __atomic_fetch_add(&q->signal, 1, __ATOMIC_RELEASE);
    hx_futex_wake(&q->signal, 1 << 30);
}

void vnpu_queue_packet(uint64_t id, uint32_t flags, uint32_t n_bufs, const struct vnpu_wire_buf *bufs,
                       uint32_t msg_len, const uint8_t *msg) {
    struct packet *k = malloc(sizeof *k + n_bufs * sizeof(struct dspqueue_buffer) + msg_len);
    if (!k) {
        vnpu_log("queue 0x%llx: no memory for a packet: dropped", (unsigned long long) id);
        return;
    }
    k->next = NULL;
    k->flags = flags;
    k->n_bufs = n_bufs;
    k->msg_len = msg_len;
    k->bufs = (struct dspqueue_buffer *) (k + 1);
    k->msg = (uint8_t *) (k->bufs + n_bufs);
    memcpy(k->msg, msg, msg_len);
    int bad = -1;
    for (uint32_t i = 0; i < n_bufs; i++) {
        struct dspqueue_buffer *b = &k->bufs[i];
        b->fd = (uint32_t) bufs[i].fd;
        b->flags = bufs[i].flags;
        b->offset = bufs[i].offset;
        b->size = bufs[i].size;
        b->address = 0;
        b->ptr = vnpu_map_addr(bufs[i].fd, bufs[i].offset, bufs[i].size);
        if (!b->ptr && bad < 0) bad = (int) i;
    }
    hx_lock(&queues_lock);
    struct dspqueue *q = find_locked(id);
    if (!q || !q->host_open || bad >= 0) {
        dspqueue_callback_t ecb = q ? q->error_cb : NULL;
        void *ctx = q ? q->ctx : NULL;
        hx_unlock(&queues_lock);
        if (!q) vnpu_log("a packet for queue 0x%llx, which is not open: dropped", (unsigned long long) id);
        else if (bad >= 0)
            vnpu_log("a packet for queue 0x%llx names buffer fd %d [%u, +%u), which the host did not map: dropped",
                     (unsigned long long) id, bufs[bad].fd, bufs[bad].offset, bufs[bad].size);
        else vnpu_log("a packet for queue 0x%llx after the host closed it: dropped", (unsigned long long) id);
        if (ecb) ecb(q, AEE_EBADPARM, ctx);
        free(k);
        return;
    }
    hx_lock(&q->lock);
    if (q->tail) q->tail->next = k;
    else q->head = k;
    q->tail = k;
    q->n_waiting++;
    hx_unlock(&q->lock);
    wake(q);
    hx_unlock(&queues_lock);
}

/* The queue's thread: the skel's callback runs whenever packets wait (it drains them itself). */
static void queue_thread(void *arg) {
    struct dspqueue *q = arg;
    for (;;) {
        int seen = __atomic_load_n(&q->signal, __ATOMIC_ACQUIRE);
        if (q->stopping) break;
        if (__atomic_load_n(&q->head, __ATOMIC_ACQUIRE)) {
            q->packet_cb(q, 0, q->ctx);
            continue;
        }
        hx_futex_wait(&q->signal, seen);
    }
}

AEEResult dspqueue_import(uint64_t id, dspqueue_callback_t packet_cb, dspqueue_callback_t error_cb, void *ctx,
                          dspqueue_t *out) {
    hx_lock(&queues_lock);
    struct dspqueue *q = find_locked(id);
    AEEResult status = !q ? AEE_EBADITEM : q->imported ? AEE_EITEMBUSY : AEE_SUCCESS;
    if (status == AEE_SUCCESS) {
        q->packet_cb = packet_cb;
        q->error_cb = error_cb;
        q->ctx = ctx;
        q->stopping = 0;
        q->imported = 1;
    }
    hx_unlock(&queues_lock);
    if (status != AEE_SUCCESS) {
        vnpu_log("dspqueue_import: queue 0x%llx %s", (unsigned long long) id,
                 status == (AEEResult) AEE_EBADITEM ? "was not created by the host" : "is imported already");
        return status;
    }
    if (packet_cb) {
        qurt_thread_attr_t attr;
        qurt_thread_attr_init(&attr);
        qurt_thread_attr_set_name(&attr, "dspqueue");
        if (qurt_thread_create(&q->thread, &attr, queue_thread, q) != 0) {
            hx_lock(&queues_lock);
            q->imported = 0;
            forget_locked(q);
            hx_unlock(&queues_lock);
            return AEE_EQURTTHREADCREATE;
        }
    }
    VNPU_TRACE("dspqueue_import: queue 0x%llx", (unsigned long long) id);
    *out = q;
    return AEE_SUCCESS;
}

/* The skel's close: waits for its callback to return (the callback's own loop ends when the queue
 * is idle), then the queue is the host's alone. */
AEEResult dspqueue_close(dspqueue_t q) {
    if (!q || !q->imported) return AEE_EBADPARM;
    q->stopping = 1;
    wake(q);
    if (q->thread && q->thread != qurt_thread_get_id()) qurt_thread_join(q->thread, NULL);
    hx_lock(&queues_lock);
    q->imported = 0;
    forget_locked(q);
    hx_unlock(&queues_lock);
    return AEE_SUCCESS;
}

AEEResult dspqueue_peek_noblock(dspqueue_t q, uint32_t *flags, uint32_t *n_bufs, uint32_t *msg_len) {
    hx_lock(&q->lock);
    struct packet *k = q->head;
    if (k) {
        if (flags) *flags = k->flags;
        if (n_bufs) *n_bufs = k->n_bufs;
        if (msg_len) *msg_len = k->msg_len;
    }
    hx_unlock(&q->lock);
    return k ? AEE_SUCCESS : AEE_EWOULDBLOCK;
}

AEEResult dspqueue_read_noblock(dspqueue_t q, uint32_t *flags, uint32_t max_bufs, uint32_t *n_bufs,
                                struct dspqueue_buffer *bufs, uint32_t max_msg, uint32_t *msg_len, uint8_t *msg) {
    hx_lock(&q->lock);
    struct packet *k = q->head;
    if (!k) {
        hx_unlock(&q->lock);
        return AEE_EWOULDBLOCK;
    }
    if (k->n_bufs > max_bufs || k->msg_len > max_msg) {
        hx_unlock(&q->lock);  /* left in the queue, as the SDK's does: the caller may peek and retry */
        return AEE_EBADPARM;
    }
    q->head = k->next;
    if (!q->head) q->tail = NULL;
    q->n_waiting--;
    q->n_read++;
    q->bytes_read += k->msg_len;
    hx_unlock(&q->lock);
    if (flags) *flags = k->flags;
    if (n_bufs) *n_bufs = k->n_bufs;
    if (msg_len) *msg_len = k->msg_len;
    memcpy(bufs, k->bufs, k->n_bufs * sizeof *bufs);
    memcpy(msg, k->msg, k->msg_len);
    free(k);
    return AEE_SUCCESS;
}

/* Waits on the arrivals word; timeout_us DSPQUEUE_TIMEOUT_NONE waits for ever. */
static int wait_packet(dspqueue_t q, uint32_t timeout_us) {
    uint64_t end = HAP_perf_get_time_us() + timeout_us;
    for (;;) {
        int seen = __atomic_load_n(&q->signal, __ATOMIC_ACQUIRE);
        if (__atomic_load_n(&q->head, __ATOMIC_ACQUIRE)) return AEE_SUCCESS;
        if (q->stopping) return AEE_EBADSTATE;
        if (timeout_us == DSPQUEUE_TIMEOUT_NONE) {
            hx_futex_wait(&q->signal, seen);
            continue;
        }
        uint64_t now = HAP_perf_get_time_us();
        if (now >= end) return AEE_EEXPIRED;
        struct hx_timespec ts = { (int32_t) ((end - now) / 1000000u), (int32_t) ((end - now) % 1000000u) * 1000 };
        hx_futex(&q->signal, HX_FUTEX_WAIT | HX_FUTEX_PRIVATE, seen, &ts);
    }
}

AEEResult dspqueue_peek(dspqueue_t q, uint32_t *flags, uint32_t *n_bufs, uint32_t *msg_len, uint32_t timeout_us) {
    int r = wait_packet(q, timeout_us);
    return r == AEE_SUCCESS ? dspqueue_peek_noblock(q, flags, n_bufs, msg_len) : r;
}

AEEResult dspqueue_read(dspqueue_t q, uint32_t *flags, uint32_t max_bufs, uint32_t *n_bufs,
                        struct dspqueue_buffer *bufs, uint32_t max_msg, uint32_t *msg_len, uint8_t *msg,
                        uint32_t timeout_us) {
    int r = wait_packet(q, timeout_us);
    return r == AEE_SUCCESS ? dspqueue_read_noblock(q, flags, max_bufs, n_bufs, bufs, max_msg, msg_len, msg) : r;
}

/* A DSP -> host packet. Each buffer is named by the host's fd: the one the skel passes back (it
 * got it from a read), or else the mapping its pointer falls in. */
AEEResult dspqueue_write_noblock(dspqueue_t q, uint32_t flags, uint32_t n_bufs, struct dspqueue_buffer *bufs,
                                 uint32_t msg_len, const uint8_t *msg) {
    if (!q || n_bufs > DSPQUEUE_MAX_BUFFERS || msg_len > DSPQUEUE_MAX_MESSAGE_SIZE) return AEE_EBADPARM;
    struct vnpu_wire_buf wire[DSPQUEUE_MAX_BUFFERS];
    for (uint32_t i = 0; i < n_bufs; i++) {
        int32_t fd = (int32_t) bufs[i].fd;
        uint32_t offset = bufs[i].offset;
        if (!vnpu_map_addr(fd, offset, bufs[i].size) && (!bufs[i].ptr || vnpu_map_find(bufs[i].ptr, &fd, &offset))) {
            vnpu_log("dspqueue_write: buffer %u (fd %d, %p) is not one the host mapped", (unsigned) i, (int) fd,
                     bufs[i].ptr);
            return AEE_EBADPARM;
        }
        wire[i] = (struct vnpu_wire_buf) { fd, bufs[i].flags, offset, bufs[i].size };
    }
    struct vnpu_queue_packet head = { q->id, flags, n_bufs, msg_len };
    if (vnpu_send(VNPU_QUEUE_PACKET_DSP, 0, &head, sizeof head, wire, n_bufs * sizeof wire[0], msg, msg_len)) {
        return AEE_ECONNRESET;
    }
    hx_lock(&q->lock);
    q->n_written++;
    q->bytes_written += msg_len;
    hx_unlock(&q->lock);
    return AEE_SUCCESS;
}

AEEResult dspqueue_write(dspqueue_t q, uint32_t flags, uint32_t n_bufs, struct dspqueue_buffer *bufs,
                         uint32_t msg_len, const uint8_t *msg, uint32_t timeout_us) {
    (void) timeout_us;  /* the socket takes the packet at once or the host is gone */
    return dspqueue_write_noblock(q, flags, n_bufs, bufs, msg_len, msg);
}

/* The host's reader waits on its socket, so there is no one to wake early. */
AEEResult dspqueue_write_early_wakeup_noblock(dspqueue_t q, uint32_t delay, uint32_t flags) {
    (void) q; (void) delay; (void) flags;
    return AEE_SUCCESS;
}

AEEResult dspqueue_get_stat(dspqueue_t q, enum dspqueue_stat stat, uint64_t *value) {
    hx_lock(&q->lock);
    switch (stat) {
        case DSPQUEUE_STAT_READ_QUEUE_PACKETS: *value = q->n_waiting; break;
        case DSPQUEUE_STAT_WRITE_QUEUE_PACKETS: *value = 0; break;  /* written packets leave at once */
        case DSPQUEUE_STAT_READ_QUEUE_BYTES: *value = q->head ? q->head->msg_len : 0; break;
        default: *value = 0; break;
    }
    hx_unlock(&q->lock);
    return AEE_SUCCESS;
}
