/* hexbuild's stand-in libcdsprpc.so: what the session's reader thread does for queues. A packet
 * from the DSP joins its queue's FIFO (and the packet callback runs, if the queue has one); when the
 * DSP process is gone every queue of the session ends, waking its readers, and error callbacks run. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "vnpu_host.h"

/* A callback on q returned (q may be closing, and waits for it). */
static void callback_done(struct vnpu_session *s, struct vnpu_hqueue *q) {
    pthread_mutex_lock(&s->mu);
    if (--q->callbacks == 0 && q->closing) pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&s->mu);
}

void vnpu_queue_deliver(struct vnpu_session *s, uint8_t *body, size_t len) {
    struct vnpu_queue_packet h;
    if (len < sizeof h) goto bad;
    memcpy(&h, body, sizeof h);
    if (h.n_bufs > DSPQUEUE_MAX_BUFFERS || (uint64_t) sizeof h + 16ull * h.n_bufs + h.msg_len != len) goto bad;
    struct vnpu_pkt *p = malloc(sizeof *p);
    if (!p) {
        free(body);
        return;
    }
    *p = (struct vnpu_pkt){NULL, body, h.flags, h.n_bufs, h.msg_len, (const struct vnpu_wire_buf *) (body + sizeof h),
                      body + sizeof h + 16 * h.n_bufs};
    pthread_mutex_lock(&s->mu);
    struct vnpu_hqueue *q = s->queues;
    while (q && q->id != h.queue_id) q = q->next;
    if (!q || q->closing) {
        pthread_mutex_unlock(&s->mu);
        static int said;
        vnpu_say_once(said, "session %d: a packet for queue %llu, which is not open: dropped", VNPU_SESSION_OF(s->edomain),
                      (unsigned long long) h.queue_id);
        free(p);
        free(body);
        return;
    }
    if (q->tail) q->tail->next = p;
    else q->head = p;
    q->tail = p;
    q->n_waiting++;
    q->bytes_waiting += p->msg_len;
    pthread_cond_broadcast(&q->cv);
    dspqueue_callback_t cb = q->packet_cb;
    void *ctx = q->ctx;
    if (cb) q->callbacks++;
    pthread_mutex_unlock(&s->mu);
    if (cb) {
        cb((dspqueue_t) q, AEE_SUCCESS, ctx);
        callback_done(s, q);
    }
    return;
bad:
    vnpu_say("session %d: a malformed queue packet (%zu bytes) from the DSP process: dropped",
             VNPU_SESSION_OF(s->edomain), len);
    free(body);
}

void vnpu_queues_session_ended(struct vnpu_session *s, bool died) {
    struct {
        dspqueue_callback_t cb;
        dspqueue_t q;
        void *ctx;
    } calls[64];
    int n = 0;
    pthread_mutex_lock(&s->mu);
    for (struct vnpu_hqueue *q = s->queues; q; q = q->next) {
        q->end_err = died ? VNPU_E_DEAD : AEE_EBADSTATE;
        pthread_cond_broadcast(&q->cv);
        if (died && q->error_cb && !q->closing && n < 64) {
            calls[n].cb = q->error_cb;
            calls[n].q = (dspqueue_t) q;
            calls[n].ctx = q->ctx;
            q->callbacks++;
            n++;
        }
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < n; i++) {
        calls[i].cb(calls[i].q, VNPU_E_DEAD, calls[i].ctx);
        callback_done(s, (struct vnpu_hqueue *) calls[i].q);
    }
}
