/* hexbuild virtual NPU: a session's skels and handles, as FastRPC's DSP side keeps them.
 *
 * OPEN names a module by URI, `file:///libNAME.so?NAME_skel_handle_invoke&_modver=1.0&...`: the
 * library is found on ADSP_LIBRARY_PATH (';' or ':' separated; then the current directory), loaded
 * once per process, and its invoke function (the symbol after '?') is called with method 0, the
 * URI and an 8-byte out buffer, exactly as FastRPC calls it; the handle the skel writes there is
 * the session's handle for it. INVOKE and CLOSE go to the invoke function of their handle. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <AEEStdErr.h>
#include <remote.h>

#include "../runtime/sys.h"
#include "vnpu.h"

typedef int (*skel_invoke)(remote_handle64 h, uint32_t sc, remote_arg *pra);

struct module {
    char name[128];
    struct vnpu_lib *lib;
    struct module *next;
};

struct handle {
    uint64_t h;
    skel_invoke invoke;
    struct handle *next;
};

/* Only the main thread opens, invokes and closes: no lock. */
static struct module *modules;
static struct handle *handles;

static int exists(const char *path) {
    long fd = hx_open(path, HX_O_RDONLY, 0);
    if (fd < 0) return 0;
    hx_close((int) fd);
    return 1;
}

/* dir/name for the first dir of ADSP_LIBRARY_PATH that has it, else ./name. */
static int find_library(const char *name, char *path, size_t cap) {
    const char *dirs = getenv("ADSP_LIBRARY_PATH");
    for (const char *p = dirs; p && *p;) {
        size_t n = strcspn(p, ";:");
        if (n && n + 1 + strlen(name) < cap) {
            memcpy(path, p, n);
            path[n] = '/';
            strcpy(path + n + 1, name);
            if (exists(path)) return 0;
        }
        p += n + (p[n] != 0);
    }
    if (strlen(name) + 3 > cap) return -1;
    strcpy(path, "./");
    strcat(path, name);
    return exists(path) ? 0 : -1;
}

static struct module *load_module(const char *name, int *status) {
    for (struct module *m = modules; m; m = m->next) {
        if (strcmp(m->name, name) == 0) return m;
    }
    char path[512];
    if (find_library(name, path, sizeof path)) {
        const char *dirs = getenv("ADSP_LIBRARY_PATH");
        vnpu_log("OPEN: %s is not on ADSP_LIBRARY_PATH (%s) nor in the current directory", name,
                 dirs ? dirs : "not set");
        *status = AEE_EUNABLETOLOAD;
        return NULL;
    }
    struct module *m = calloc(1, sizeof *m);
    if (!m) {
        *status = AEE_ENOMEMORY;
        return NULL;
    }
    *status = vnpu_load(path, &m->lib);
    if (*status != AEE_SUCCESS) {
        free(m);
        return NULL;
    }
    strlcpy(m->name, name, sizeof m->name);
    m->next = modules;
    modules = m;
    return m;
}

int vnpu_open_skel(const char *uri, uint32_t len, uint64_t *handle) {
    static const char scheme[] = "file:///";
    size_t n = strnlen(uri, len);
    char name[128], symbol[128];
    const char *q = memchr(uri, '?', n);
    if (n < sizeof scheme || strncmp(uri, scheme, sizeof scheme - 1) || !q) {
        vnpu_log("OPEN: '%.*s' is not a module URI (file:///lib.so?symbol&...)", (int) n, uri);
        return AEE_EBADPARM;
    }
    const char *lib = uri + sizeof scheme - 1;
    size_t lib_len = (size_t) (q - lib), sym_len = strcspn(q + 1, "&");
    if (lib_len == 0 || lib_len >= sizeof name || sym_len == 0 || sym_len >= sizeof symbol) {
        vnpu_log("OPEN: '%.*s' names no library or no symbol", (int) n, uri);
        return AEE_EBADPARM;
    }
    memcpy(name, lib, lib_len);
    name[lib_len] = 0;
    memcpy(symbol, q + 1, sym_len);
    symbol[sym_len] = 0;
    int status;
    struct module *m = load_module(name, &status);
    if (!m) return status;
    skel_invoke invoke = (skel_invoke) vnpu_symbol(m->lib, symbol);
    if (!invoke) {
        vnpu_log("OPEN: %s has no symbol %s", name, symbol);
        return AEE_EUNABLETOLOAD;
    }
    struct handle *hd = calloc(1, sizeof *hd);
    if (!hd) return AEE_ENOMEMORY;
    /* method 0, as FastRPC opens a module: in the URI (with its NUL), out the 64-bit handle */
    char *copy = malloc(n + 1);
    uint64_t h = 0;
    if (!copy) {
        free(hd);
        return AEE_ENOMEMORY;
    }
    memcpy(copy, uri, n);
    copy[n] = 0;
    remote_arg pra[2];
    pra[0].buf.pv = copy;
    pra[0].buf.nLen = n + 1;
    pra[1].buf.pv = &h;
    pra[1].buf.nLen = sizeof h;
    status = invoke(0, REMOTE_SCALARS_MAKEX(0, 0, 1, 1, 0, 0), pra);
    free(copy);
    VNPU_TRACE("OPEN %s: %s -> status 0x%x, handle 0x%llx", name, symbol, (unsigned) status, (unsigned long long) h);
    if (status != AEE_SUCCESS) {
        free(hd);
        return status;
    }
    hd->h = h;
    hd->invoke = invoke;
    hd->next = handles;
    handles = hd;
    *handle = h;
    return AEE_SUCCESS;
}

static struct handle *find_handle(uint64_t h) {
    for (struct handle *hd = handles; hd; hd = hd->next) {
        if (hd->h == h) return hd;
    }
    vnpu_log("a call on handle 0x%llx, which no OPEN returned", (unsigned long long) h);
    return NULL;
}

/* The in buffers are copied out of the message, each on a 128-byte boundary (the skel may read
 * them as its types); the out buffers are zeroed and sent back whole, whatever the status. */
int vnpu_invoke(uint64_t h, uint32_t sc, uint32_t n_bufs, const uint32_t *sizes, const uint8_t *in, size_t in_len,
                uint8_t **out, size_t *out_len) {
    uint32_t n_in = REMOTE_SCALARS_INBUFS(sc), n_out = REMOTE_SCALARS_OUTBUFS(sc);
    if (n_in + n_out != n_bufs || REMOTE_SCALARS_INHANDLES(sc) || REMOTE_SCALARS_OUTHANDLES(sc)) {
        vnpu_log("INVOKE: scalars 0x%08x do not match %u buffers (or pass handles)", (unsigned) sc, (unsigned) n_bufs);
        return AEE_EBADPARM;
    }
    uint64_t total_in = 0, total_out = 0, room = 0;
    for (uint32_t i = 0; i < n_bufs; i++) {
        *(i < n_in ? &total_in : &total_out) += sizes[i];
        room += ((uint64_t) sizes[i] + 127) & ~(uint64_t) 127;
    }
    if (total_in != in_len || room > 0x40000000u) {
        vnpu_log("INVOKE: %llu bytes of in buffers announced, %u sent", (unsigned long long) total_in, (unsigned) in_len);
        return AEE_EBADPARM;
    }
    struct handle *hd = find_handle(h);
    if (!hd) return AEE_EBADHANDLE;
    remote_arg *pra = calloc(n_bufs ? n_bufs : 1, sizeof *pra);
    uint8_t *block = memalign(128, (size_t) room + 128);
    *out = malloc((size_t) total_out + 1);
    if (!pra || !block || !*out) {
        free(pra);
        free(block);
        free(*out);
        *out = NULL;
        return AEE_ENOMEMORY;
    }
    uint8_t *p = block;
    for (uint32_t i = 0; i < n_bufs; i++) {
        pra[i].buf.pv = p;
        pra[i].buf.nLen = sizes[i];
        if (i < n_in) {
            memcpy(p, in, sizes[i]);
            in += sizes[i];
        } else {
            memset(p, 0, sizes[i]);
        }
        p += ((size_t) sizes[i] + 127) & ~(size_t) 127;
    }
    int status = hd->invoke(h, sc, pra);
    VNPU_TRACE("INVOKE handle 0x%llx method %u -> status 0x%x", (unsigned long long) h,
               (unsigned) REMOTE_SCALARS_METHOD(sc), (unsigned) status);
    uint8_t *o = *out;
    for (uint32_t i = n_in; i < n_bufs; i++) {
        memcpy(o, pra[i].buf.pv, sizes[i]);
        o += sizes[i];
    }
    *out_len = (size_t) total_out;
    free(block);
    free(pra);
    return status;
}

int vnpu_close_handle(uint64_t h) {
    struct handle *hd = find_handle(h);
    if (!hd) return AEE_EBADHANDLE;
    int status = hd->invoke(h, REMOTE_SCALARS_MAKEX(0, 1, 0, 0, 0, 0), NULL);
    VNPU_TRACE("CLOSE handle 0x%llx -> status 0x%x", (unsigned long long) h, (unsigned) status);
    for (struct handle **p = &handles; *p; p = &(*p)->next) {
        if (*p == hd) {
            *p = hd->next;
            break;
        }
    }
    free(hd);
    return status;
}
