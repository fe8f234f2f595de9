/* hexbuild's stand-in libcdsprpc.so: sessions. Each FastRPC session (effective domain) is one DSP
 * process, `$HEXBUILD_VNPU_QEMU -cpu $HEXBUILD_VNPU_CPU $HEXBUILD_VNPU_RUNTIME 3`, with its end of a
 * SOCK_SEQPACKET socketpair as fd 3 (process.c). One reader thread per session sorts what arrives: replies go to
 * the request that waits for them, queue packets to their queue. When the process dies (EOF), every
 * waiter gets VNPU_E_DEAD and one line says why; nothing waits for it again. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vnpu_host.h"

static struct vnpu_session g_sessions[VNPU_NUM_EDOMAINS];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_started; /* a session was ever started: the table is initialized */

static void init_sessions(void) {
    for (int i = 0; i < VNPU_NUM_EDOMAINS; i++) {
        struct vnpu_session *s = &g_sessions[i];
        memset(s, 0, sizeof *s);
        s->edomain = i;
        s->sock = -1;
        s->pid = -1;
        s->next_seq = 1;
        pthread_mutex_init(&s->mu, NULL);
        pthread_mutex_init(&s->send_mu, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->cv, &ca);
        pthread_condattr_destroy(&ca);
    }
}

struct vnpu_session *vnpu_session_get(int edomain) {
    if (edomain < 0 || edomain >= VNPU_NUM_EDOMAINS) return NULL;
    pthread_once(&g_once, init_sessions);
    return &g_sessions[edomain];
}

int vnpu_reply_status(const uint8_t *reply, size_t len) {
    if (len < 4) return AEE_EBADITEM;
    int32_t st;
    memcpy(&st, reply, 4);
    return st;
}

struct vnpu_map *vnpu_map_find_locked(struct vnpu_session *s, int fd) {
    for (struct vnpu_map *m = s->maps; m; m = m->next)
        if (m->fd == fd) return m;
    return NULL;
}

static void session_ended(struct vnpu_session *s, bool died) {
    pid_t pid;
    pthread_mutex_lock(&s->mu);
    pid = s->pid;
    if (died) s->state = VNPU_DEAD; /* an orderly stop stays CLOSING until vnpu_session_stop is done */
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    vnpu_queues_session_ended(s, died);
    int status = vnpu_reap(pid, 2000);
    if (died) {
        int sess = VNPU_SESSION_OF(s->edomain);
        if (status == -1)
            vnpu_say("the DSP process of session %d (pid %d) closed its socket and did not exit: killed", sess,
                     (int) pid);
        else if (WIFSIGNALED(status))
            vnpu_say("the DSP process of session %d (pid %d) died: %s (signal %d)", sess, (int) pid,
                     strsignal(WTERMSIG(status)), WTERMSIG(status));
        else
            vnpu_say("the DSP process of session %d (pid %d) ended unexpectedly (exit status %d)", sess, (int) pid,
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    } else {
        vnpu_trace("session %d: DSP process %d ended (status 0x%x)", VNPU_SESSION_OF(s->edomain), (int) pid, (unsigned) status);
    }
    pthread_mutex_lock(&s->send_mu); /* no sender still uses the fd number */
    pthread_mutex_lock(&s->mu);
    s->pid = -1;
    close(s->sock);
    s->sock = -1;
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&s->send_mu);
}

static void deliver_reply(struct vnpu_session *s, uint32_t seq, uint8_t *body, size_t len) {
    pthread_mutex_lock(&s->mu);
    for (struct vnpu_pending *p = s->pending; p; p = p->next) {
        if (p->seq == seq && !p->done) {
            p->reply = body;
            p->reply_len = len;
            p->done = true;
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
            return;
        }
    }
    pthread_mutex_unlock(&s->mu);
    static int said;
    vnpu_say_once(said, "session %d: a reply (seq %u) that no request waits for: dropped", VNPU_SESSION_OF(s->edomain),
                  seq);
    free(body);
}

static void *reader_main(void *arg) {
    struct vnpu_session *s = arg;
    int sock = s->sock;
    bool died = true;
    for (;;) {
        struct vnpu_hdr h;
        /* The size of the next packet first (MSG_TRUNC reports it whole), then the packet. */
        ssize_t n = recv(sock, &h, sizeof h, MSG_PEEK | MSG_TRUNC);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        uint8_t *buf = malloc((size_t) n + 1);
        if (!buf) break;
        ssize_t got;
        do {
            struct iovec iov = {buf, (size_t) n};
            char cbuf[CMSG_SPACE(sizeof(int) * 4)];
            struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
            got = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
            for (struct cmsghdr *c = got > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                    for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
                        close(((int *) CMSG_DATA(c))[i]);
        } while (got < 0 && errno == EINTR);
        if (got <= 0) {
            free(buf);
            break;
        }
        if ((size_t) got < sizeof h) {
            vnpu_say("session %d: a %zd-byte message from the DSP process, shorter than a header: dropped",
                     VNPU_SESSION_OF(s->edomain), got);
            free(buf);
            continue;
        }
        memcpy(&h, buf, sizeof h);
        size_t blen = (size_t) got - sizeof h;
        if (h.len != blen) {
            vnpu_say("session %d: message type 0x%x says %u bytes and has %zu: dropped", VNPU_SESSION_OF(s->edomain),
                     h.type, h.len, blen);
            free(buf);
            continue;
        }
        memmove(buf, buf + sizeof h, blen);
        vnpu_trace("session %d < type 0x%x seq %u len %u", VNPU_SESSION_OF(s->edomain), h.type, h.seq, h.len);
        if (h.type & VNPU_REPLY) {
            deliver_reply(s, h.seq, buf, blen);
        } else if (h.type == VNPU_QUEUE_PACKET_DSP) {
            vnpu_queue_deliver(s, buf, blen);
        } else if (h.type == VNPU_LOG) {
            buf[blen] = 0;
            vnpu_say("dsp: %s", (char *) buf);
            free(buf);
        } else {
            static int said;
            vnpu_say_once(said, "session %d: unknown message type %u from the DSP process: dropped",
                          VNPU_SESSION_OF(s->edomain), h.type);
            free(buf);
        }
    }
    pthread_mutex_lock(&s->mu);
    if (s->state == VNPU_CLOSING) died = false;
    pthread_mutex_unlock(&s->mu);
    session_ended(s, died);
    return NULL;
}

int vnpu_session_start_locked(struct vnpu_session *s) {
    if (s->state == VNPU_RUNNING) return AEE_SUCCESS;
    if (s->state == VNPU_DEAD) return VNPU_E_DEAD;
    if (s->state == VNPU_CLOSING) return AEE_EBADSTATE;
    int sock;
    pid_t pid;
    int err = vnpu_spawn(&sock, &pid);
    if (err) return err;
    s->sock = sock;
    s->pid = pid;
    s->state = VNPU_RUNNING;
    if (pthread_create(&s->reader, NULL, reader_main, s) != 0) {
        s->state = VNPU_IDLE;
        close(s->sock);
        s->sock = -1;
        vnpu_reap(pid, 0);
        vnpu_say("cannot start the DSP process: no thread for the session's reader");
        return AEE_ECONNREFUSED;
    }
    s->reader_started = true;
    __atomic_store_n(&g_started, 1, __ATOMIC_RELEASE);
    vnpu_trace("session %d: DSP process %d", VNPU_SESSION_OF(s->edomain), (int) pid);
    return AEE_SUCCESS;
}

void vnpu_session_stop(struct vnpu_session *s) {
    pthread_mutex_lock(&s->mu);
    if (s->state != VNPU_RUNNING && s->state != VNPU_DEAD) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    bool running = s->state == VNPU_RUNNING;
    if (running) {
        s->state = VNPU_CLOSING;
        shutdown(s->sock, SHUT_RDWR); /* EOF for the DSP process; wakes the reader */
    }
    bool join = s->reader_started;
    s->reader_started = false;
    pthread_t reader = s->reader;
    pthread_mutex_unlock(&s->mu);
    if (join) {
        if (pthread_equal(reader, pthread_self())) pthread_detach(reader); /* closed from a packet callback */
        else pthread_join(reader, NULL);
    }
    /* Forget what belonged to the process: its mappings, and (after a death) the dead state. */
    pthread_mutex_lock(&s->mu);
    struct vnpu_map *m = s->maps;
    s->maps = NULL;
    if (s->state == VNPU_DEAD || s->state == VNPU_CLOSING) s->state = VNPU_IDLE;
    pthread_mutex_unlock(&s->mu);
    while (m) {
        struct vnpu_map *next = m->next;
        if (m->own_mapping) munmap(m->host, m->size);
        free(m);
        m = next;
    }
}

/* ---- sending ---- */

static int send_locked_msg(struct vnpu_session *s, struct msghdr *mh, uint32_t timeout_us) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        ssize_t n = sendmsg(s->sock, mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) return AEE_SUCCESS;
        if (errno == EINTR) continue;
        if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) return VNPU_E_DEAD;
        if (errno == EMSGSIZE) {
            size_t total = 0;
            for (size_t i = 0; i < (size_t) mh->msg_iovlen; i++) total += mh->msg_iov[i].iov_len;
            vnpu_say("session %d: a %zu-byte message is larger than the socket takes", VNPU_SESSION_OF(s->edomain),
                     total);
            return AEE_EBADSIZE;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            vnpu_say("session %d: send: %s", VNPU_SESSION_OF(s->edomain), strerror(errno));
            return AEE_EFAILED;
        }
        int wait_ms = -1;
        if (timeout_us != DSPQUEUE_TIMEOUT_NONE) {
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            int64_t spent = (int64_t) (t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000;
            if (spent >= (int64_t) timeout_us) return AEE_EEXPIRED;
            wait_ms = (int) (((int64_t) timeout_us - spent + 999) / 1000);
        }
        struct pollfd pfd = {s->sock, POLLOUT, 0};
        poll(&pfd, 1, wait_ms);
    }
}

static int send_msg(struct vnpu_session *s, uint32_t type, uint32_t seq, const struct iovec *body, int nbody, int fd,
                    uint32_t timeout_us) {
    struct vnpu_hdr h = {type, seq, 0};
    struct iovec iov[8];
    if (nbody > 7) return AEE_EBADPARM;
    iov[0].iov_base = &h;
    iov[0].iov_len = sizeof h;
    size_t len = 0;
    for (int i = 0; i < nbody; i++) {
        iov[i + 1] = body[i];
        len += body[i].iov_len;
    }
    if (len > UINT32_MAX) return AEE_EBADSIZE;
    h.len = (uint32_t) len;
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t) nbody + 1};
    if (fd >= 0) {
        memset(cbuf, 0, sizeof cbuf);
        mh.msg_control = cbuf;
        mh.msg_controllen = sizeof cbuf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    pthread_mutex_lock(&s->send_mu);
    int err = s->sock < 0 ? VNPU_E_DEAD : send_locked_msg(s, &mh, timeout_us);
    pthread_mutex_unlock(&s->send_mu);
    vnpu_trace("session %d > type %u seq %u len %zu%s: 0x%x", VNPU_SESSION_OF(s->edomain), type, seq, len,
               fd >= 0 ? " +fd" : "", (unsigned) err);
    return err;
}

int vnpu_send_noreply(struct vnpu_session *s, uint32_t type, const struct iovec *iov, int iovcnt,
                      uint32_t timeout_us) {
    pthread_mutex_lock(&s->mu);
    int st = s->state == VNPU_RUNNING ? AEE_SUCCESS : s->state == VNPU_DEAD ? VNPU_E_DEAD : AEE_EBADSTATE;
    pthread_mutex_unlock(&s->mu);
    if (st) return st;
    return send_msg(s, type, 0, iov, iovcnt, -1, timeout_us);
}

int vnpu_request(struct vnpu_session *s, uint32_t type, const void *body, size_t len, int fd, uint8_t **reply,
                 size_t *reply_len) {
    struct vnpu_pending p = {0};
    *reply = NULL;
    *reply_len = 0;
    pthread_mutex_lock(&s->mu);
    if (s->state != VNPU_RUNNING) {
        int st = s->state == VNPU_DEAD ? VNPU_E_DEAD : AEE_EBADSTATE;
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    p.seq = s->next_seq++;
    p.next = s->pending;
    s->pending = &p;
    pthread_mutex_unlock(&s->mu);

    struct iovec iov = {(void *) body, len};
    int err = send_msg(s, type, p.seq, &iov, len ? 1 : 0, fd, DSPQUEUE_TIMEOUT_NONE);

    pthread_mutex_lock(&s->mu);
    while (err == AEE_SUCCESS && !p.done && s->state == VNPU_RUNNING) pthread_cond_wait(&s->cv, &s->mu);
    if (err == AEE_SUCCESS && !p.done) err = s->state == VNPU_DEAD ? VNPU_E_DEAD : AEE_EBADSTATE;
    for (struct vnpu_pending **pp = &s->pending; *pp; pp = &(*pp)->next) {
        if (*pp == &p) {
            *pp = p.next;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (err != AEE_SUCCESS) {
        free(p.reply);
        return err;
    }
    *reply = p.reply;
    *reply_len = p.reply_len;
    return AEE_SUCCESS;
}

/* At exit, every DSP process still running is ended in order, so that none outlives the host
 * program (its stderr is the program's) and each is reaped. A program that never closes its
 * handles (llama.cpp keeps its sessions to the end) is the usual case. */
__attribute__((destructor)) static void end_sessions_at_exit(void) {
    if (!__atomic_load_n(&g_started, __ATOMIC_ACQUIRE)) return;
    for (int i = 0; i < VNPU_NUM_EDOMAINS; i++) {
        struct vnpu_session *s = &g_sessions[i];
        pthread_mutex_lock(&s->mu);
        uint64_t peak = s->mapped_peak;
        bool announced = s->announced;
        pthread_mutex_unlock(&s->mu);
        /* the bytes on HTP buffers, as the dispatch proof counts them where the backend prints
         * no buffer lines (its INFO lines are off by default) */
        if (announced)
            vnpu_say("HTP%d: %llu bytes on HTP buffers (mapped to the DSP with fastrpc_mmap, at most at once)",
                     VNPU_SESSION_OF(s->edomain), (unsigned long long) peak);
        vnpu_session_stop(s);
    }
}
