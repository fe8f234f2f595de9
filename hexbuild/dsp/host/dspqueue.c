/* hexbuild's stand-in libcdsprpc.so: the host end of dspqueue. A queue belongs to one session; its
 * packets travel as QUEUE_PACKET messages, naming buffers by the host fd of a fastrpc_mmap'ed block
 * (as dspqueue does: fd + offset + size). Packets from the DSP wait in a FIFO per queue until
 * dspqueue_read takes them (llama.cpp polls; it gives no callbacks), or the packet callback is
 * called from the session's reader thread. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vnpu_host.h"

#define QUEUE_MAGIC 0x71756575u

/* What the host library passes (qualcomm/fastrpc's layout): 24 bytes, the pointer at 16. */
_Static_assert(sizeof(struct dspqueue_buffer) == 24, "struct dspqueue_buffer is 24 bytes");
_Static_assert(sizeof(struct vnpu_queue_packet) == 20, "the wire's queue packet header is 20 bytes");
_Static_assert(sizeof(struct vnpu_wire_buf) == 16, "the wire's buffer is 16 bytes");

static uint64_t g_next_id = 1;

static struct vnpu_hqueue *checked(dspqueue_t queue) {
    struct vnpu_hqueue *q = (struct vnpu_hqueue *) queue;
    return q && q->magic == QUEUE_MAGIC ? q : NULL;
}

VNPU_API AEEResult dspqueue_create(int domain, uint32_t flags, uint32_t req_queue_size, uint32_t resp_queue_size,
                                   dspqueue_callback_t packet_callback, dspqueue_callback_t error_callback,
                                   void *callback_context, dspqueue_t *queue) {
    (void) flags; /* the sizes bound a shared-memory ring in FastRPC; here the socket is the ring */
    (void) req_queue_size;
    (void) resp_queue_size;
    if (!queue) return AEE_EBADPARM;
    if (domain == -1) domain = CDSP_DOMAIN_ID;
    struct vnpu_session *s = vnpu_session_get(domain);
    if (!s) return AEE_EBADPARM;
    if (VNPU_DOMAIN_OF(domain) != CDSP_DOMAIN_ID) return AEE_EINVALIDDOMAIN;
    pthread_mutex_lock(&s->mu);
    int err = vnpu_session_start_locked(s);
    pthread_mutex_unlock(&s->mu);
    if (err) return err;
    struct vnpu_hqueue *q = calloc(1, sizeof *q);
    if (!q) return AEE_ENOMEMORY;
    q->magic = QUEUE_MAGIC;
    q->s = s;
    q->id = __atomic_fetch_add(&g_next_id, 1, __ATOMIC_RELAXED);
    q->packet_cb = packet_callback;
    q->error_cb = error_callback;
    q->ctx = callback_context;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cv, &ca);
    pthread_condattr_destroy(&ca);
    /* Listed first, so that no packet for it can arrive before it can be found. */
    pthread_mutex_lock(&s->mu);
    q->next = s->queues;
    s->queues = q;
    pthread_mutex_unlock(&s->mu);
    /* The DSP end exists from here (FastRPC creates it in this call too); the skel imports it by id. */
    uint8_t *reply;
    size_t rlen;
    err = vnpu_request(s, VNPU_QUEUE_OPEN, &q->id, 8, -1, &reply, &rlen);
    if (!err) {
        err = vnpu_reply_status(reply, rlen);
        free(reply);
    }
    if (err) {
        pthread_mutex_lock(&s->mu);
        for (struct vnpu_hqueue **pp = &s->queues; *pp; pp = &(*pp)->next)
            if (*pp == q) {
                *pp = q->next;
                break;
            }
        pthread_mutex_unlock(&s->mu);
        pthread_cond_destroy(&q->cv);
        free(q);
        return err;
    }
    *queue = (dspqueue_t) q;
    vnpu_trace("dspqueue_create session %d: queue %llu", VNPU_SESSION_OF(domain), (unsigned long long) q->id);
    return AEE_SUCCESS;
}

VNPU_API AEEResult dspqueue_export(dspqueue_t queue, uint64_t *queue_id) {
    struct vnpu_hqueue *q = checked(queue);
    if (!q || !queue_id) return AEE_EBADPARM;
    *queue_id = q->id;
    return AEE_SUCCESS;
}

VNPU_API AEEResult dspqueue_close(dspqueue_t queue) {
    struct vnpu_hqueue *q = checked(queue);
    if (!q) return AEE_EBADPARM;
    struct vnpu_session *s = q->s;
    pthread_mutex_lock(&s->mu);
    q->closing = true;
    pthread_cond_broadcast(&q->cv);
    /* No reader and no callback may still hold q when it is freed; a callback that closes its own
     * queue runs on the reader thread and does not wait for itself. */
    bool on_reader = s->reader_started && pthread_equal(s->reader, pthread_self());
    while (q->readers > 0 || (q->callbacks > 0 && !on_reader)) pthread_cond_wait(&q->cv, &s->mu);
    for (struct vnpu_hqueue **pp = &s->queues; *pp; pp = &(*pp)->next)
        if (*pp == q) {
            *pp = q->next;
            break;
        }
    bool running = s->state == VNPU_RUNNING && !q->end_err;
    pthread_mutex_unlock(&s->mu);
    int err = AEE_SUCCESS;
    if (running) {
        uint8_t *reply;
        size_t rlen;
        err = vnpu_request(s, VNPU_QUEUE_CLOSE, &q->id, 8, -1, &reply, &rlen);
        if (!err) {
            err = vnpu_reply_status(reply, rlen);
            free(reply);
        }
    }
    for (struct vnpu_pkt *p = q->head, *n; p; p = n) {
        n = p->next;
        free(p->body);
        free(p);
    }
    q->magic = 0;
    pthread_cond_destroy(&q->cv);
    free(q);
    return err;
}

static AEEResult write_packet(struct vnpu_hqueue *q, uint32_t flags, uint32_t num_buffers,
                              struct dspqueue_buffer *buffers, uint32_t message_length, const uint8_t *message,
                              uint32_t timeout_us) {
    if (num_buffers > DSPQUEUE_MAX_BUFFERS || message_length > DSPQUEUE_MAX_MESSAGE_SIZE) return AEE_EBADPARM;
    if ((num_buffers && !buffers) || (message_length && !message)) return AEE_EBADPARM;
    struct vnpu_session *s = q->s;
    struct vnpu_wire_buf wb[DSPQUEUE_MAX_BUFFERS];
    pthread_mutex_lock(&s->mu);
    int err = q->end_err;
    for (uint32_t i = 0; !err && i < num_buffers; i++) {
        const struct dspqueue_buffer *b = &buffers[i];
        struct vnpu_map *m = vnpu_map_find_locked(s, (int) b->fd);
        if (!m) {
            static int said;
            vnpu_say_once(said, "dspqueue_write: buffer fd %d is not mapped to session %d (fastrpc_mmap)", (int) b->fd,
                          VNPU_SESSION_OF(s->edomain));
            err = AEE_ENOSUCHMAP;
        } else if (b->size ? (uint64_t) b->offset + b->size > m->size : b->offset != 0) {
            err = AEE_EBADPARM;
        }
        wb[i] = (struct vnpu_wire_buf){(int32_t) b->fd, b->flags, b->offset, b->size};
    }
    pthread_mutex_unlock(&s->mu);
    if (err) return err;
    struct vnpu_queue_packet head = {q->id, flags, num_buffers, message_length};
    struct iovec iov[3] = {{&head, sizeof head}, {wb, sizeof wb[0] * num_buffers}, {(void *) message, message_length}};
    return vnpu_send_noreply(s, VNPU_QUEUE_PACKET, iov, 3, timeout_us);
}

VNPU_API AEEResult dspqueue_write(dspqueue_t queue, uint32_t flags, uint32_t num_buffers,
                                  struct dspqueue_buffer *buffers, uint32_t message_length, const uint8_t *message,
                                  uint32_t timeout_us) {
    struct vnpu_hqueue *q = checked(queue);
    if (!q) return AEE_EBADPARM;
    return write_packet(q, flags, num_buffers, buffers, message_length, message, timeout_us);
}

VNPU_API AEEResult dspqueue_write_noblock(dspqueue_t queue, uint32_t flags, uint32_t num_buffers,
                                          struct dspqueue_buffer *buffers, uint32_t message_length,
                                          const uint8_t *message) {
    struct vnpu_hqueue *q = checked(queue);
    if (!q) return AEE_EBADPARM;
    int err = write_packet(q, flags, num_buffers, buffers, message_length, message, 0);
    return err == AEE_EEXPIRED ? AEE_EWOULDBLOCK : err;
}

/* Waits (s->mu held) for a packet at the head of q; AEE_EEXPIRED after timeout_us. */
static int wait_packet_locked(struct vnpu_hqueue *q, uint32_t timeout_us) {
    struct vnpu_session *s = q->s;
    struct timespec until;
    if (timeout_us != DSPQUEUE_TIMEOUT_NONE) {
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += timeout_us / 1000000;
        until.tv_nsec += (long) (timeout_us % 1000000) * 1000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
    }
    while (!q->head) {
        if (q->end_err) return q->end_err;
        if (q->closing) return AEE_EBADSTATE;
        if (timeout_us == 0) return AEE_EEXPIRED;
        if (timeout_us == DSPQUEUE_TIMEOUT_NONE) pthread_cond_wait(&q->cv, &s->mu);
        else if (pthread_cond_timedwait(&q->cv, &s->mu, &until) == ETIMEDOUT && !q->head)
            return q->end_err ? q->end_err : AEE_EEXPIRED;
    }
    return AEE_SUCCESS;
}

static AEEResult read_packet(dspqueue_t queue, uint32_t *flags, uint32_t max_buffers, uint32_t *num_buffers,
                             struct dspqueue_buffer *buffers, uint32_t max_message_length, uint32_t *message_length,
                             uint8_t *message, uint32_t timeout_us, bool pop) {
    struct vnpu_hqueue *q = checked(queue);
    if (!q) return AEE_EBADPARM;
    struct vnpu_session *s = q->s;
    pthread_mutex_lock(&s->mu);
    q->readers++;
    int err = wait_packet_locked(q, timeout_us);
    struct vnpu_pkt *p = err ? NULL : q->head;
    if (p && pop) {
        /* As dspqueue: a packet that does not fit stays where it is. */
        if ((buffers && max_buffers < p->n_bufs) || (message && max_message_length < p->msg_len)) err = AEE_EBADPARM;
        else {
            q->head = p->next;
            if (!q->head) q->tail = NULL;
            q->n_waiting--;
            q->bytes_waiting -= p->msg_len;
        }
    }
    if (p && !err) {
        if (flags) *flags = p->flags;
        if (num_buffers) *num_buffers = p->n_bufs;
        if (message_length) *message_length = p->msg_len;
    }
    if (p && !err && pop) {
        for (uint32_t i = 0; buffers && i < p->n_bufs; i++) {
            const struct vnpu_wire_buf *w = &p->bufs[i];
            struct dspqueue_buffer *b = &buffers[i];
            struct vnpu_map *m = vnpu_map_find_locked(s, w->fd);
            b->fd = (uint32_t) w->fd;
            b->flags = w->flags;
            b->offset = w->offset;
            b->size = w->size;
            b->ptr = NULL;
            if (!m) err = AEE_ENOSUCHMAP;
            else if (w->size ? (uint64_t) w->offset + w->size > m->size : w->offset != 0) err = AEE_EBADITEM;
            else {
                b->ptr = (uint8_t *) m->host + w->offset;
                if (!w->size) b->size = (uint32_t) m->size;
            }
        }
        if (message && p->msg_len) memcpy(message, p->msg, p->msg_len);
    }
    if (--q->readers == 0 && q->closing) pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&s->mu);
    if (p && !err && pop) {
        free(p->body);
        free(p);
    } else if (p && pop && err != AEE_EBADPARM) {
        free(p->body); /* consumed, but its buffers were not this session's */
        free(p);
    }
    if (err == AEE_ENOSUCHMAP) {
        static int said;
        vnpu_say_once(said, "dspqueue_read: the DSP named a buffer fd that is not mapped to session %d",
                      VNPU_SESSION_OF(s->edomain));
    }
    return err;
}

VNPU_API AEEResult dspqueue_read(dspqueue_t queue, uint32_t *flags, uint32_t max_buffers, uint32_t *num_buffers,
                                 struct dspqueue_buffer *buffers, uint32_t max_message_length,
                                 uint32_t *message_length, uint8_t *message, uint32_t timeout_us) {
    return read_packet(queue, flags, max_buffers, num_buffers, buffers, max_message_length, message_length, message,
                       timeout_us, true);
}

VNPU_API AEEResult dspqueue_read_noblock(dspqueue_t queue, uint32_t *flags, uint32_t max_buffers,
                                         uint32_t *num_buffers, struct dspqueue_buffer *buffers,
                                         uint32_t max_message_length, uint32_t *message_length, uint8_t *message) {
    int err = read_packet(queue, flags, max_buffers, num_buffers, buffers, max_message_length, message_length,
                          message, 0, true);
    return err == AEE_EEXPIRED ? AEE_EWOULDBLOCK : err;
}

VNPU_API AEEResult dspqueue_peek(dspqueue_t queue, uint32_t *flags, uint32_t *num_buffers, uint32_t *message_length,
                                 uint32_t timeout_us) {
    return read_packet(queue, flags, 0, num_buffers, NULL, 0, message_length, NULL, timeout_us, false);
}

VNPU_API AEEResult dspqueue_peek_noblock(dspqueue_t queue, uint32_t *flags, uint32_t *num_buffers,
                                         uint32_t *message_length) {
    int err = read_packet(queue, flags, 0, num_buffers, NULL, 0, message_length, NULL, 0, false);
    return err == AEE_EEXPIRED ? AEE_EWOULDBLOCK : err;
}

VNPU_API AEEResult dspqueue_write_early_wakeup_noblock(dspqueue_t queue, uint32_t wakeup_delay,
                                                       uint32_t packet_flags) {
    (void) wakeup_delay; /* a hint to the reader's polling: the socket wakes readers at once */
    (void) packet_flags;
    return checked(queue) ? AEE_SUCCESS : AEE_EBADPARM;
}

VNPU_API AEEResult dspqueue_get_stat(dspqueue_t queue, enum dspqueue_stat stat, uint64_t *value) {
    struct vnpu_hqueue *q = checked(queue);
    if (!q || !value) return AEE_EBADPARM;
    pthread_mutex_lock(&q->s->mu);
    int err = AEE_SUCCESS;
    switch (stat) {
    case DSPQUEUE_STAT_READ_QUEUE_PACKETS: *value = q->n_waiting; break;
    case DSPQUEUE_STAT_READ_QUEUE_BYTES: *value = q->bytes_waiting; break;
    /* a write is on its way to the DSP process as soon as dspqueue_write returns */
    case DSPQUEUE_STAT_WRITE_QUEUE_PACKETS: case DSPQUEUE_STAT_WRITE_QUEUE_BYTES: *value = 0; break;
    case DSPQUEUE_STAT_EARLY_WAKEUP_WAIT_TIME: case DSPQUEUE_STAT_EARLY_WAKEUP_MISSES: *value = 0; break;
    default: err = AEE_EUNSUPPORTED;
    }
    pthread_mutex_unlock(&q->s->mu);
    return err;
}

VNPU_API AEEResult dspqueue_import(uint64_t queue_id, dspqueue_callback_t packet_callback,
                                   dspqueue_callback_t error_callback, void *callback_context, dspqueue_t *queue) {
    (void) queue_id, (void) packet_callback, (void) error_callback, (void) callback_context, (void) queue;
    static int said;
    vnpu_say_once(said, "dspqueue_import is the DSP side's call, not the host's");
    return AEE_EUNSUPPORTED;
}
