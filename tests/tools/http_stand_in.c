/* A stand-in for llama-server on a virtual phone, which cannot run an Android llama-server.
 *
 * It takes llama-server's own --host/--port (other flags are ignored), prints llama-server's
 * "listening" line, and answers what hexbuild serve and an OpenAI client ask over plain HTTP/1.1:
 * GET /health, GET /v1/models, POST /v1/chat/completions (a JSON answer with usage counts, or
 * server-sent events when the body asks for "stream": true). One connection at a time; each
 * answer closes the connection. Streamed tokens are STAND_IN_DELAY_MS apart (default 0), so
 * a test can kill the server in the middle of an answer; a request's "max_tokens" makes a streamed
 * answer that long (default: one pass over the words), for benchmarks.
 *
 * Built by tests/infra/serve_tools.py with the system C compiler; no libraries beyond libc.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *WORDS[] = {"hello", " from", " the", " stand", "-in", " server", "."};
#define NWORDS (sizeof(WORDS) / sizeof(WORDS[0]))

static void send_all(int fd, const char *buf, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w <= 0) return;
        buf += w;
        n -= (size_t)w;
    }
}

static void respond(int fd, int status, const char *type, const char *body) {
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                     status, status == 200 ? "OK" : "Not Found", type, strlen(body));
    send_all(fd, head, (size_t)n);
    send_all(fd, body, strlen(body));
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void chat(int fd, int stream, long delay_ms, size_t ntokens) {
    char buf[1024];
    if (!stream) {
        char text[256] = "";
        for (size_t i = 0; i < NWORDS; i++) strcat(text, WORDS[i]);
        snprintf(buf, sizeof buf,
                 "{\"id\":\"chatcmpl-stand-in\",\"object\":\"chat.completion\",\"created\":0,\"model\":\"stand-in\","
                 "\"choices\":[{\"index\":0,\"finish_reason\":\"stop\",\"message\":{\"role\":\"assistant\","
                 "\"content\":\"%s\"}}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":%zu,"
                 "\"total_tokens\":%zu}}",
                 text, NWORDS, NWORDS + 5);
        respond(fd, 200, "application/json", buf);
        return;
    }
    const char *head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    send_all(fd, head, strlen(head));
    for (size_t i = 0; i < ntokens; i++) {
        int n = snprintf(buf, sizeof buf,
                         "data: {\"id\":\"chatcmpl-stand-in\",\"object\":\"chat.completion.chunk\",\"created\":0,"
                         "\"model\":\"stand-in\",\"choices\":[{\"index\":0,\"finish_reason\":null,"
                         "\"delta\":{\"content\":\"%s\"}}]}\n\n",
                         WORDS[i % NWORDS]);
        send_all(fd, buf, (size_t)n);
        if (delay_ms > 0) sleep_ms(delay_ms);
    }
    int n = snprintf(buf, sizeof buf,
                     "data: {\"id\":\"chatcmpl-stand-in\",\"object\":\"chat.completion.chunk\",\"created\":0,"
                     "\"model\":\"stand-in\",\"choices\":[{\"index\":0,\"finish_reason\":\"stop\",\"delta\":{}}],"
                     "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":%zu,\"total_tokens\":%zu}}\n\n"
                     "data: [DONE]\n\n",
                     ntokens, ntokens + 5);
    send_all(fd, buf, (size_t)n);
}

static void handle(int fd, long delay_ms) {
    char req[65536];
    size_t got = 0;
    char *end = NULL;
    while (got < sizeof req - 1) {  /* the head, then the body as Content-Length says */
        ssize_t r = read(fd, req + got, sizeof req - 1 - got);
        if (r <= 0) return;
        got += (size_t)r;
        req[got] = 0;
        end = strstr(req, "\r\n\r\n");
        if (end) {
            char *cl = strcasestr(req, "content-length:");
            size_t want = cl && cl < end ? (size_t)atol(cl + 15) : 0;
            if (got >= (size_t)(end + 4 - req) + want) break;
        }
    }
    if (!end) return;
    if (strncmp(req, "GET /health ", 12) == 0) {
        respond(fd, 200, "application/json", "{\"status\":\"ok\"}");
    } else if (strncmp(req, "GET /v1/models ", 15) == 0) {
        respond(fd, 200, "application/json",
                "{\"object\":\"list\",\"data\":[{\"id\":\"stand-in\",\"object\":\"model\",\"owned_by\":\"hexbuild-test\"}]}");
    } else if (strncmp(req, "POST /v1/chat/completions ", 26) == 0) {
        char *body = end + 4;
        int stream = strstr(body, "\"stream\":true") != NULL || strstr(body, "\"stream\": true") != NULL;
        char *mt = strstr(body, "\"max_tokens\":");
        size_t ntokens = mt && atol(mt + 13) > 0 ? (size_t)atol(mt + 13) : NWORDS;
        chat(fd, stream, delay_ms, ntokens);
    } else {
        respond(fd, 404, "application/json", "{\"error\":{\"code\":404,\"message\":\"File Not Found\"}}");
    }
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1";
    int port = 8080;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--host") == 0) host = argv[i + 1];
        if (strcmp(argv[i], "--port") == 0) port = atoi(argv[i + 1]);
    }
    const char *d = getenv("STAND_IN_DELAY_MS");
    long delay_ms = d ? atol(d) : 0;
    signal(SIGPIPE, SIG_IGN);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(s, 16) != 0) {
        fprintf(stderr, "main: couldn't bind HTTP server socket, hostname: %s, port: %d\n", host, port);
        return 1;
    }
    fprintf(stderr, "main: server is listening on http://%s:%d - starting the main loop\n", host, port);
    fflush(stderr);
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0) continue;
        handle(c, delay_ms);
        shutdown(c, SHUT_WR);
        close(c);
    }
}
