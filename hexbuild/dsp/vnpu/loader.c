/* hexbuild virtual NPU: the loader of the skel, a Hexagon ELF shared object (what the DSP's own
 * dynamic loader does for a FastRPC module). The segments go into one mapping, relocations are
 * applied at once (no lazy binding: the PLT's slots are filled before any code runs), undefined
 * symbols resolve against the runtime's export table (exports.c), and the initialisers run (DT_INIT,
 * DT_INIT_ARRAY, and .ctors when no DT_INIT start-up code would run it). A skel
 * that imports something the runtime does not provide is refused before any of its code runs, with
 * one line per missing name. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <AEEStdErr.h>

#include "../runtime/sys.h"
#include "vnpu.h"

#define EM_HEXAGON 164
#define ET_DYN 3
#define PT_LOAD 1
#define PT_DYNAMIC 2
#define SHN_UNDEF 0
#define STB_WEAK 2

enum { DT_NULL = 0, DT_NEEDED = 1, DT_PLTRELSZ = 2, DT_HASH = 4, DT_STRTAB = 5, DT_SYMTAB = 6, DT_RELA = 7,
       DT_RELASZ = 8, DT_RELAENT = 9, DT_INIT = 12, DT_REL = 17, DT_PLTREL = 20, DT_TEXTREL = 22, DT_JMPREL = 23,
       DT_INIT_ARRAY = 25, DT_INIT_ARRAYSZ = 27 };
#define DT_GNU_HASH 0x6ffffef5

/* Hexagon's dynamic relocations (the ABI's numbers) */
enum { R_HEX_NONE = 0, R_HEX_32 = 6, R_HEX_GLOB_DAT = 33, R_HEX_JMP_SLOT = 34, R_HEX_RELATIVE = 35 };

typedef struct {
    unsigned char ident[16];
    uint16_t type, machine;
    uint32_t version, entry, phoff, shoff, flags;
    uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx;
} Ehdr;
typedef struct { uint32_t type, offset, vaddr, paddr, filesz, memsz, flags, align; } Phdr;
typedef struct { uint32_t name, type, flags, addr, offset, size, link, info, addralign, entsize; } Shdr;
typedef struct { int32_t tag; uint32_t val; } Dyn;
typedef struct { uint32_t name, value, size; unsigned char info, other; uint16_t shndx; } Sym;
typedef struct { uint32_t offset, info; int32_t addend; } Rela;

struct vnpu_lib {
    unsigned char *base;   /* load address of vaddr 0 */
    size_t span;
    const Sym *syms;
    uint32_t n_syms;
    const char *strs;
    char name[64];         /* the file's name, as a crash report names a module */
};

/* Every library loaded, for the fault handler (fault.c) to name where a faulting pc is: written
 * by the main thread before any of that library's code runs, read by a faulting one. */
#define MAX_LIBS 8
static const struct vnpu_lib *loaded[MAX_LIBS];
static int n_loaded;

const char *vnpu_lib_at(uintptr_t addr, uint32_t *offset) {
    int n = __atomic_load_n(&n_loaded, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++) {
        const struct vnpu_lib *l = loaded[i];
        if (addr >= (uintptr_t) l->base && addr - (uintptr_t) l->base < l->span) {
            *offset = (uint32_t) (addr - (uintptr_t) l->base);
            return l->name;
        }
    }
    return NULL;
}

static int read_file(const char *path, unsigned char **data, size_t *len) {
    int fd = (int) hx_open(path, HX_O_RDONLY, 0);
    if (fd < 0) return -1;
    size_t cap = 1 << 20, n = 0;
    unsigned char *buf = malloc(cap);
    for (long r; buf; n += (size_t) r) {
        if (n == cap) {
            unsigned char *bigger = realloc(buf, cap *= 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
        }
        r = hx_read(fd, buf + n, cap - n);
        if (r <= 0) {
            if (r < 0) {
                free(buf);
                buf = NULL;
            }
            break;
        }
    }
    hx_close(fd);
    *data = buf;
    *len = n;
    return buf ? 0 : -1;
}

/* The number of dynamic symbols: DT_HASH says it; with only DT_GNU_HASH, it is one past the last
 * symbol of the longest chain. */
static uint32_t count_symbols(const uint32_t *hash, const uint32_t *gnu) {
    if (hash) return hash[1];
    if (!gnu) return 0;
    uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom = gnu[2];
    const uint32_t *buckets = gnu + 4 + bloom;  /* 32-bit bloom words */
    const uint32_t *chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t i = 0; i < nbuckets; i++) {
        if (buckets[i] > last) last = buckets[i];
    }
    if (last < symoffset) return symoffset;
    while (!(chain[last - symoffset] & 1)) last++;
    return last + 1;
}

/* The .ctors section (address and size), or size 0. Clang puts a constructor there for the
 * standalone Hexagon ABI skels are built with; no dynamic tag names it: the SDK's own start-up code
 * (reached through DT_INIT) walks it, which a skel linked without that code does not have. */
static void ctors_section(const unsigned char *file, size_t len, uint32_t *addr, uint32_t *size) {
    const Ehdr *eh = (const Ehdr *) file;
    *size = 0;
    if (!eh->shoff || eh->shentsize != sizeof(Shdr) || eh->shoff > len || eh->shnum > (len - eh->shoff) / sizeof(Shdr) ||
        eh->shstrndx >= eh->shnum)
        return;
    const Shdr *sh = (const Shdr *) (file + eh->shoff);
    const Shdr *names = &sh[eh->shstrndx];
    for (int i = 0; i < eh->shnum; i++) {
        if (names->offset > len || sh[i].name >= len - names->offset || len - names->offset - sh[i].name < 7) continue;
        if (memcmp(file + names->offset + sh[i].name, ".ctors", 7) == 0 && sh[i].addr) {
            *addr = sh[i].addr;
            *size = sh[i].size;
        }
    }
}

static int fail(const char *path, const char *why) {
    vnpu_log("cannot load %s: %s", path, why);
    return AEE_EUNABLETOLOAD;
}

/* The value of a relocation's symbol; missing counts the imports the runtime lacks. */
static uint32_t symbol_value(const struct vnpu_lib *lib, uint32_t index, int *missing) {
    if (index == 0 || index >= lib->n_syms) return 0;
    const Sym *s = &lib->syms[index];
    if (s->shndx != SHN_UNDEF) return (uint32_t) (uintptr_t) lib->base + s->value;
    const char *name = lib->strs + s->name;
    void *p = vnpu_export(name);
    if (!p && (s->info >> 4) != STB_WEAK) {
        vnpu_log("the skel imports %s, which the virtual NPU's runtime does not provide", name);
        (*missing)++;
    }
    return (uint32_t) (uintptr_t) p;
}

static int relocate(const struct vnpu_lib *lib, const Rela *r, uint32_t bytes, int *missing, const char *path) {
    for (uint32_t i = 0; i < bytes / sizeof *r; i++, r++) {
        uint32_t type = r->info & 0xff, *where = (uint32_t *) (lib->base + r->offset);
        if (r->offset > lib->span - 4) return fail(path, "a relocation outside the image");
        switch (type) {
            case R_HEX_NONE:
                break;
            case R_HEX_RELATIVE:
                *where = (uint32_t) (uintptr_t) lib->base + (uint32_t) r->addend;
                break;
            case R_HEX_32:
            case R_HEX_GLOB_DAT:
            case R_HEX_JMP_SLOT:
                *where = symbol_value(lib, r->info >> 8, missing) + (uint32_t) r->addend;
                break;
            default: {
                vnpu_log("cannot load %s: relocation type %u (at 0x%x) is not supported", path, (unsigned) type,
                         (unsigned) r->offset);
                return AEE_EUNABLETOLOAD;
            }
        }
    }
    return AEE_SUCCESS;
}

int vnpu_load(const char *path, struct vnpu_lib **out) {
    unsigned char *file;
    size_t len;
    if (read_file(path, &file, &len)) return fail(path, "cannot read it");
    int status = AEE_EUNABLETOLOAD;
    unsigned char *image = NULL;
    size_t image_len = 0;
    uint32_t end = 0, align = 4096;
    struct vnpu_lib *lib = calloc(1, sizeof *lib);
    const Ehdr *eh = (const Ehdr *) file;
    if (!lib) goto done;
    if (len < sizeof *eh || memcmp(eh->ident, "\177ELF", 4) || eh->ident[4] != 1 || eh->ident[5] != 1) {
        status = fail(path, "not a 32-bit little-endian ELF file");
        goto done;
    }
    if (eh->machine != EM_HEXAGON || eh->type != ET_DYN) {
        status = fail(path, "not a Hexagon shared object");
        goto done;
    }
    if (eh->phoff > len || eh->phnum > (len - eh->phoff) / sizeof(Phdr)) {
        status = fail(path, "truncated program headers");
        goto done;
    }
    const Phdr *ph = (const Phdr *) (file + eh->phoff);
    const Phdr *dyn_ph = NULL;
    for (int i = 0; i < eh->phnum; i++) {
        if (ph[i].type == PT_LOAD) {
            if (ph[i].vaddr + ph[i].memsz > end) end = ph[i].vaddr + ph[i].memsz;
            if (ph[i].align > align) align = ph[i].align;
            if (ph[i].offset > len || ph[i].filesz > len - ph[i].offset || ph[i].filesz > ph[i].memsz) {
                status = fail(path, "a segment outside the file");
                goto done;
            }
        } else if (ph[i].type == PT_DYNAMIC) {
            dyn_ph = &ph[i];
        }
    }
    if (!dyn_ph || end == 0 || (align & (align - 1))) {
        status = fail(path, "no dynamic section or no loadable segment");
        goto done;
    }
    /* One mapping for the whole image, readable, writable and executable (the emulator checks
     * execute permission), placed at the segments' alignment. */
    image_len = ((size_t) end + 4095) & ~(size_t) 4095;
    image = hx_mmap(image_len + align, HX_PROT_RWX, HX_MAP_PRIVATE | HX_MAP_ANON, -1, 0);
    if (!image) {
        status = AEE_ENOMEMORY;
        goto done;
    }
    lib->base = (unsigned char *) (((uintptr_t) image + align - 1) & ~(uintptr_t) (align - 1));
    lib->span = image_len;
    for (int i = 0; i < eh->phnum; i++) {
        if (ph[i].type == PT_LOAD) memcpy(lib->base + ph[i].vaddr, file + ph[i].offset, ph[i].filesz);
    }
    const Dyn *dyn = (const Dyn *) (lib->base + dyn_ph->vaddr);
    uint32_t v[32] = { 0 }, gnu_hash = 0, pltrel = 0;
    void (*init)(void) = NULL;
    for (; dyn->tag != DT_NULL; dyn++) {
        if (dyn->tag >= 0 && dyn->tag < 32) v[dyn->tag] = dyn->val;
        if (dyn->tag == DT_GNU_HASH) gnu_hash = dyn->val;
        if (dyn->tag == DT_PLTREL) pltrel = dyn->val;
        if (dyn->tag == DT_REL || dyn->tag == DT_TEXTREL) {
            status = fail(path, "REL relocations or text relocations (Hexagon uses RELA)");
            goto done;
        }
    }
    if (!v[DT_SYMTAB] || !v[DT_STRTAB] || (v[DT_JMPREL] && pltrel != DT_RELA)) {
        status = fail(path, "no symbol table, or PLT relocations that are not RELA");
        goto done;
    }
    lib->syms = (const Sym *) (lib->base + v[DT_SYMTAB]);
    lib->strs = (const char *) (lib->base + v[DT_STRTAB]);
    lib->n_syms = count_symbols(v[DT_HASH] ? (const uint32_t *) (lib->base + v[DT_HASH]) : NULL,
                                gnu_hash ? (const uint32_t *) (lib->base + gnu_hash) : NULL);
    int missing = 0;
    if (v[DT_RELA]) status = relocate(lib, (const Rela *) (lib->base + v[DT_RELA]), v[DT_RELASZ], &missing, path);
    else status = AEE_SUCCESS;
    if (status == AEE_SUCCESS && v[DT_JMPREL])
        status = relocate(lib, (const Rela *) (lib->base + v[DT_JMPREL]), v[DT_PLTRELSZ], &missing, path);
    if (status == AEE_SUCCESS && missing) {
        vnpu_log("cannot load %s: %d import%s missing", path, missing, missing == 1 ? " is" : "s are");
        status = AEE_EUNABLETOLOAD;
    }
    if (status != AEE_SUCCESS) goto done;
    VNPU_TRACE("loaded %s at %p (%u bytes, %u symbols)", path, (void *) lib->base, (unsigned) image_len,
               (unsigned) lib->n_syms);
    const char *slash = strrchr(path, '/');
    strlcpy(lib->name, slash ? slash + 1 : path, sizeof lib->name);
    if (n_loaded < MAX_LIBS) {  /* before its constructors: they are its code too */
        loaded[n_loaded] = lib;
        __atomic_store_n(&n_loaded, n_loaded + 1, __ATOMIC_RELEASE);
    }
    /* the skel's constructors, as the DSP's loader runs them */
    if (v[DT_INIT]) {
        init = (void (*)(void)) (lib->base + v[DT_INIT]);
        init();
    }
    for (uint32_t i = 0; v[DT_INIT_ARRAY] && i < v[DT_INIT_ARRAYSZ] / 4; i++) {
        void (*fn)(void) = ((void (**)(void)) (lib->base + v[DT_INIT_ARRAY]))[i];
        if (fn && (uintptr_t) fn != (uintptr_t) -1) fn();
    }
    uint32_t ctors, ctors_size;
    ctors_section(file, len, &ctors, &ctors_size);
    for (uint32_t i = ctors_size / 4; !v[DT_INIT] && ctors + ctors_size <= lib->span && i-- > 0;) {
        void (*fn)(void) = ((void (**)(void)) (lib->base + ctors))[i];  /* last to first, as .ctors runs */
        if (fn && (uintptr_t) fn != (uintptr_t) -1) fn();
    }
done:
    free(file);
    if (status != AEE_SUCCESS) {
        if (image) hx_munmap(image, image_len + align);
        free(lib);
        lib = NULL;
    }
    *out = lib;
    return status;
}

void *vnpu_symbol(const struct vnpu_lib *lib, const char *name) {
    for (uint32_t i = 1; i < lib->n_syms; i++) {
        const Sym *s = &lib->syms[i];
        if (s->shndx != SHN_UNDEF && strcmp(lib->strs + s->name, name) == 0) return lib->base + s->value;
    }
    return NULL;
}
