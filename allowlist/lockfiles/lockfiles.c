/* The driver of allow-from-lockfile: the reader registry, projects (a
 * directory and its config files, read once), and the walk over the PATHs
 * given on the command line. Readers do the parsing; this file only
 * decides which file goes to which reader, and in what order. */
#include "lockfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "growbuf.h"
#include "text.h"

/* A lockfile of 100,000 npm packages is about 40 MiB; anything over this is
 * not a lockfile, and reading it whole would only cost memory. */
#define PROJECT_FILE_MAX ((size_t)64 << 20)
/* Symlinked directories are not followed, so the tree is finite; this only
 * bounds the recursion on absurdly deep trees. */
#define WALK_DEPTH_MAX 128

extern const sl_lockreader sl_reader_npm, sl_reader_yarn, sl_reader_pnpm, sl_reader_pip,
    sl_reader_pipenv, sl_reader_poetry, sl_reader_uv, sl_reader_pdm, sl_reader_cargo, sl_reader_go,
    sl_reader_bundler, sl_reader_composer, sl_reader_nuget, sl_reader_gradle, sl_reader_maven,
    sl_reader_docker;

const sl_lockreader *const sl_lockreaders[] = {
    &sl_reader_npm, &sl_reader_yarn, &sl_reader_pnpm, &sl_reader_pip, &sl_reader_pipenv,
    &sl_reader_poetry, &sl_reader_uv, &sl_reader_pdm, &sl_reader_cargo, &sl_reader_go,
    &sl_reader_bundler, &sl_reader_composer, &sl_reader_nuget, &sl_reader_gradle,
    &sl_reader_maven, &sl_reader_docker, NULL,
};

/* Directories a walk never enters: installed dependencies, VCS metadata,
 * virtualenvs, build output and IDE state. None holds the project's own
 * lockfiles, and some hold thousands of files named like them. */
static const char *const skipped_dirs[] = {
    "node_modules", ".git", "vendor", "target", ".venv", "venv", "__pycache__", ".tox",
    "build", "dist", ".gradle", ".idea", NULL,
};

static char *concat(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = sl_xrealloc(NULL, la + lb + 1);
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
    return s;
}

void sl_lockerr_set(sl_lockerr *e, const char *file, int line, const char *fmt, ...)
{
    if (!e)
        return;
    snprintf(e->file, sizeof e->file, "%s", file ? file : "");
    e->line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    if (!e->msg[0])                /* an empty message would read as "no error" */
        snprintf(e->msg, sizeof e->msg, "error");
}

/* ---- projects --------------------------------------------------------- */

typedef struct pfile {
    char *rel;                     /* as the reader asked for it */
    char *path;                    /* as it is named in messages */
    char *data;                    /* NUL-terminated; NULL when not held */
    size_t len;
    bool held;                     /* data is the file's bytes */
    bool done;                     /* already read as a lockfile by the driver */
} pfile;

struct sl_project {
    char *dir;                     /* for sl_project_dir: "." when none was given */
    char *prefix;                  /* joined before a relative name: "", "/" or "dir/" */
    pfile *files;
    size_t n, cap;
};

sl_project *sl_project_new(const char *dir)
{
    sl_project *p = sl_xrealloc(NULL, sizeof *p);
    memset(p, 0, sizeof *p);
    size_t len = dir ? strlen(dir) : 0;
    while (len > 1 && dir[len - 1] == '/')
        len--;
    if (len == 0) {
        /* A lockfile named without a directory: its config files are named
         * the same way (".npmrc", not "./.npmrc"). */
        p->dir = sl_xstrdup(".");
        p->prefix = sl_xstrdup("");
    } else {
        p->dir = sl_xrealloc(NULL, len + 1);
        memcpy(p->dir, dir, len);
        p->dir[len] = '\0';
        p->prefix = (len == 1 && dir[0] == '/') ? sl_xstrdup("/") : concat(p->dir, "/");
    }
    return p;
}

void sl_project_free(sl_project *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->files[i].rel);
        free(p->files[i].path);
        free(p->files[i].data);
    }
    free(p->files);
    free(p->dir);
    free(p->prefix);
    free(p);
}

const char *sl_project_dir(const sl_project *p)
{
    return p->dir;
}

static pfile *project_entry(sl_project *p, const char *rel)
{
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->files[i].rel, rel))
            return &p->files[i];
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 8;
        p->files = sl_xrealloc(p->files, p->cap * sizeof *p->files);
    }
    pfile *f = &p->files[p->n++];
    memset(f, 0, sizeof *f);
    f->rel = sl_xstrdup(rel);
    f->path = rel[0] == '/' ? sl_xstrdup(rel) : concat(p->prefix, rel);
    return f;
}

/* From this size, a file's buffer is put on transparent huge pages. */
#define HUGE_BUFFER_MIN ((size_t)2 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

/* A buffer for a file of n bytes (and its NUL): for a large file, aligned
 * to a huge page and advised MADV_HUGEPAGE, as faulting in a 38 MB
 * package-lock.json 4 KiB at a time cost about 0.15 s on the virtual
 * machines sluice is measured on. Either way it is free()'s to release. */
static char *file_buffer(size_t n)
{
    if (n < HUGE_BUFFER_MIN)
        return sl_xrealloc(NULL, n);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, n) != 0)
        abort();                   /* out of memory, as in sl_xrealloc */
    /* Best effort: without it (THP off, an old kernel) it is only slower. */
    (void)madvise(p, (n + 4095) & ~(size_t)4095, MADV_HUGEPAGE);
    return p;
}

/* Read a whole regular file. Returns 1 (read), 0 (does not exist), -1
 * (error, in err). */
static int read_whole(const char *path, char **data, size_t *len, sl_lockerr *err)
{
    /* O_NONBLOCK: opening a FIFO must not hang the walk. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 0;
        sl_lockerr_set(err, path, 0, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        sl_lockerr_set(err, path, 0, "cannot stat: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        sl_lockerr_set(err, path, 0, "%s", S_ISDIR(st.st_mode) ? "is a directory, not a file"
                                                               : "not a regular file");
        close(fd);
        return -1;
    }
    if ((unsigned long long)st.st_size > PROJECT_FILE_MAX) {
        sl_lockerr_set(err, path, 0, "file too large (%lld bytes; the limit is 64 MiB)",
                       (long long)st.st_size);
        close(fd);
        return -1;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = file_buffer(cap + 1);
    for (;;) {
        if (n == cap) {            /* the file grew while we read it */
            if (cap > PROJECT_FILE_MAX) {
                sl_lockerr_set(err, path, 0, "file too large (over 64 MiB)");
                free(buf);
                close(fd);
                return -1;
            }
            cap *= 2;
            buf = sl_xrealloc(buf, cap + 1);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            sl_lockerr_set(err, path, 0, "cannot read: %s", strerror(errno));
            free(buf);
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (n > PROJECT_FILE_MAX) {
        sl_lockerr_set(err, path, 0, "file too large (over 64 MiB)");
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 1;
}

const char *sl_project_file(sl_project *p, const char *rel, size_t *len, const char **path_out,
                            sl_lockerr *err)
{
    pfile *f = project_entry(p, rel);
    if (path_out)
        *path_out = f->path;
    if (!f->held) {
        sl_lockerr local;
        sl_lockerr *e = err ? err : &local;
        int r = read_whole(f->path, &f->data, &f->len, e);
        if (r <= 0) {
            if (r == 0 && err)
                err->file[0] = err->msg[0] = '\0', err->line = 0;
            if (len)
                *len = 0;
            return NULL;
        }
        f->held = true;
    }
    if (len)
        *len = f->len;
    return f->data;
}

void sl_project_put(sl_project *p, const char *rel, const char *data, size_t len)
{
    pfile *f = project_entry(p, rel);
    free(f->data);
    f->data = sl_xrealloc(NULL, len + 1);
    if (len)
        memcpy(f->data, data, len);
    f->data[len] = '\0';
    f->len = len;
    f->held = true;
}

/* ---- the driver ------------------------------------------------------- */

typedef struct driver {
    sl_derived *out;
    void (*report)(void *ctx, const char *msg);
    void *ctx;
    int errors;
    sl_project **projects;         /* one per directory, shared by its lockfiles */
    size_t nprojects, capprojects;
    struct fileid { dev_t dev, dir_dev; ino_t ino, dir; } *seen;   /* lockfiles read so far */
    size_t nseen, capseen;
    struct projread { dev_t dev; ino_t ino; const sl_lockreader *r; } *read; /* per_project */
    size_t nread, capread;
    struct msg { unsigned long hash; char *text; } *msgs;          /* reported so far */
    size_t nmsgs, capmsgs;
    struct item { char *dir, *base; bool named; } *items;         /* what the walk found, in order */
    size_t nitems, capitems;
} driver;

/* Whether this file was read already for this project directory, under
 * this name or another ("x/" and "./x/package-lock.json" on one command
 * line); records it if not. The directory counts: a lockfile hard-linked
 * into two projects may meet two different configs. */
static bool seen_before(driver *drv, const sl_project *proj, const char *path)
{
    struct stat st, dst;
    if (stat(path, &st) != 0 || stat(proj->dir, &dst) != 0)
        return false;              /* reading it will report why */
    for (size_t i = 0; i < drv->nseen; i++)
        if (drv->seen[i].dev == st.st_dev && drv->seen[i].ino == st.st_ino &&
            drv->seen[i].dir_dev == dst.st_dev && drv->seen[i].dir == dst.st_ino)
            return true;
    if (drv->nseen == drv->capseen) {
        drv->capseen = drv->capseen ? drv->capseen * 2 : 16;
        drv->seen = sl_xrealloc(drv->seen, drv->capseen * sizeof *drv->seen);
    }
    drv->seen[drv->nseen++] = (struct fileid){ st.st_dev, dst.st_dev, st.st_ino, dst.st_ino };
    return false;
}

/* Whether a per_project reader has read this project directory already
 * (under this spelling or another); records it if not. */
static bool project_read_before(driver *drv, const sl_project *proj, const sl_lockreader *r)
{
    struct stat dst;
    if (stat(proj->dir, &dst) != 0)
        return false;              /* reading it will report why */
    for (size_t i = 0; i < drv->nread; i++)
        if (drv->read[i].dev == dst.st_dev && drv->read[i].ino == dst.st_ino &&
            drv->read[i].r == r)
            return true;
    if (drv->nread == drv->capread) {
        drv->capread = drv->capread ? drv->capread * 2 : 16;
        drv->read = sl_xrealloc(drv->read, drv->capread * sizeof *drv->read);
    }
    drv->read[drv->nread++] = (struct projread){ dst.st_dev, dst.st_ino, r };
    return false;
}

static unsigned long str_hash(const char *s)
{
    unsigned long h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

/* Report one error, unless the same message was reported already: a
 * config file that several lockfiles of a project read (pip.conf for each
 * requirements file) is one problem, told once. */
static void report_err(driver *drv, const char *file, int line, const char *msg)
{
    char raw[4096 + sizeof(((sl_lockerr *)0)->msg) + 32];   /* a PATH_MAX path and a message */
    if (line > 0)
        snprintf(raw, sizeof raw, "%s:%d: %s", file, line, msg);
    else
        snprintf(raw, sizeof raw, "%s: %s", file, msg);
    /* Names and messages quote untrusted bytes: no control characters
     * reach the terminal. (Room for all of raw: nothing is cut here.) */
    char buf[sizeof raw + 3];
    sl_display_untrusted(raw, strlen(raw), buf, sizeof buf, SL_DISPLAY_KEEP_HIGH);
    unsigned long h = str_hash(buf);
    for (size_t i = 0; i < drv->nmsgs; i++)
        if (drv->msgs[i].hash == h && !strcmp(drv->msgs[i].text, buf))
            return;
    if (drv->nmsgs == drv->capmsgs) {
        drv->capmsgs = drv->capmsgs ? drv->capmsgs * 2 : 16;
        drv->msgs = sl_xrealloc(drv->msgs, drv->capmsgs * sizeof *drv->msgs);
    }
    drv->msgs[drv->nmsgs++] = (struct msg){ h, sl_xstrdup(buf) };
    drv->errors++;
    if (drv->report)
        drv->report(drv->ctx, buf);
}

static void report_lockerr(driver *drv, const sl_lockerr *e, const char *fallback_file)
{
    report_err(drv, e->file[0] ? e->file : fallback_file, e->line,
               e->msg[0] ? e->msg : "cannot be read (no reason given)");
}

/* The project of directory `dir` ("" for a lockfile named without one).
 * Two spellings of one directory are two projects, each naming its files
 * its own way. The latest project is the likeliest: a walk reads the
 * lockfiles of one directory in a row. */
static sl_project *project_for(driver *drv, const char *dir)
{
    sl_project *p = sl_project_new(dir);
    for (size_t i = drv->nprojects; i-- > 0;)
        if (!strcmp(drv->projects[i]->prefix, p->prefix)) {
            sl_project_free(p);
            return drv->projects[i];
        }
    if (drv->nprojects == drv->capprojects) {
        drv->capprojects = drv->capprojects ? drv->capprojects * 2 : 8;
        drv->projects = sl_xrealloc(drv->projects, drv->capprojects * sizeof *drv->projects);
    }
    return drv->projects[drv->nprojects++] = p;
}

/* Whether a project file exists, without reading it. */
static bool project_has(sl_project *p, const char *rel)
{
    pfile *f = project_entry(p, rel);
    struct stat st;
    return f->held || f->done || stat(f->path, &st) == 0 || (errno != ENOENT && errno != ENOTDIR);
}

static bool recognised(const char *base)
{
    for (size_t i = 0; sl_lockreaders[i]; i++)
        if (sl_lockreaders[i]->recognises(base))
            return true;
    return false;
}

/* Read one lockfile `base` in directory `dir` ("" for none) with every
 * reader that recognises its name; a per_project reader only if it has not
 * read this project yet. */
static void process_file(driver *drv, const char *dir, const char *base, bool named)
{
    if (!recognised(base)) {
        if (named) {
            sl_project *tmp = sl_project_new(dir);
            char *path = concat(tmp->prefix, base);
            report_err(drv, path, 0, "not a lockfile or package-manager config sluice knows");
            free(path);
            sl_project_free(tmp);
        }
        return;
    }
    sl_project *proj = project_for(drv, dir);

    /* R8: npm reads npm-shrinkwrap.json and ignores package-lock.json beside
     * it. A walk reaches the shrinkwrap by itself; a package-lock.json named
     * on the command line stands for its project, so its shrinkwrap is read
     * in its place. */
    if (!strcmp(base, "package-lock.json") && project_has(proj, "npm-shrinkwrap.json")) {
        if (named)
            process_file(drv, dir, "npm-shrinkwrap.json", true);
        return;
    }

    pfile *f = project_entry(proj, base);
    if (f->done || seen_before(drv, proj, f->path))
        return;                    /* named twice, or named and walked */
    f->done = true;
    sl_lockerr e = { .msg = "" };
    size_t len;
    const char *path;
    const char *data = sl_project_file(proj, base, &len, &path, &e);
    if (!data) {
        if (e.msg[0])
            report_lockerr(drv, &e, path);
        else
            report_err(drv, path, 0, "no such file (removed while being read?)");
        return;
    }
    for (size_t i = 0; sl_lockreaders[i]; i++) {
        const sl_lockreader *r = sl_lockreaders[i];
        if (!r->recognises(base) || (r->per_project && project_read_before(drv, proj, r)))
            continue;
        sl_lockerr re = { .msg = "" };
        if (!r->read(path, data, len, proj, drv->out, &re))
            report_lockerr(drv, &re, path);
    }
    /* The project entry may have moved (a reader may have looked up more
     * files); a lockfile is not needed again: let its bytes go. */
    f = project_entry(proj, base);
    free(f->data);
    f->data = NULL;
    f->held = false;
}

/* A file the walk (or the command line) found, to read once all are known.
 * Takes dir and base. */
static void add_item(driver *drv, char *dir, char *base, bool named)
{
    if (drv->nitems == drv->capitems) {
        drv->capitems = drv->capitems ? drv->capitems * 2 : 32;
        drv->items = sl_xrealloc(drv->items, drv->capitems * sizeof *drv->items);
    }
    drv->items[drv->nitems++] = (struct item){ dir, base, named };
}

/* A file (by identity) that item `owner` reads through its includes. */
typedef struct incl {
    dev_t dev;
    ino_t ino;
    size_t owner;
} incl;

typedef struct inclset {
    incl *v;
    size_t n, cap;
    size_t owner;                  /* the item being scanned */
} inclset;

static void found_include(void *ctx, const char *path)
{
    inclset *s = ctx;
    struct stat st;
    if (stat(path, &st) != 0)
        return;                    /* reading it will say why */
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->v = sl_xrealloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = (incl){ st.st_dev, st.st_ino, s->owner };
}

static int cmp_incl(const void *a, const void *b)
{
    const incl *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return x->owner < y->owner ? -1 : x->owner > y->owner;
}

/* Whether another file includes item i: any; with `roots`, one that is
 * read on its own; with `outside`, one that item i does not include in
 * turn (one outside its cycle). */
static bool included(const inclset *s, const struct stat *ids, size_t i, const bool *roots,
                     bool outside)
{
    incl key = { ids[i].st_dev, ids[i].st_ino, 0 };
    size_t lo = 0, hi = s->n;
    while (lo < hi) {              /* the first record of this file */
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_incl(&s->v[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t k = lo; k < s->n && s->v[k].dev == key.dev && s->v[k].ino == key.ino; k++) {
        size_t o = s->v[k].owner;
        if (ids[o].st_dev == key.dev && ids[o].st_ino == key.ino)
            continue;              /* the file itself: a cycle its reading finds */
        if (roots && !roots[o])
            continue;
        if (outside) {
            incl back = { ids[o].st_dev, ids[o].st_ino, i };
            if (bsearch(&back, s->v, s->n, sizeof *s->v, cmp_incl))
                continue;          /* i includes it too: the same cycle */
        }
        return true;
    }
    return false;
}

/* Which items are read on their own (root[i]): all, but for the files of
 * a reader that follows includes (pip): such a file is read only through
 * the files that include it, unless nothing else includes it; of a cycle
 * of includes that nothing outside it includes, the first file in walk
 * order is read (and reports the cycle). */
static void choose_roots(driver *drv, bool *root)
{
    inclset s = { 0 };
    struct stat *ids = sl_xrealloc(NULL, (drv->nitems + 1) * sizeof *ids);
    bool *cand = sl_xrealloc(NULL, drv->nitems + 1);   /* may be left out */
    for (size_t i = 0; i < drv->nitems; i++) {
        const struct item *it = &drv->items[i];
        root[i] = true;
        cand[i] = false;
        for (size_t k = 0; sl_lockreaders[k]; k++)
            cand[i] |= sl_lockreaders[k]->includes && sl_lockreaders[k]->recognises(it->base);
        if (!cand[i])
            continue;
        sl_project *proj = project_for(drv, it->dir);
        size_t len;
        const char *path;
        const char *data = sl_project_file(proj, it->base, &len, &path, NULL);
        if (!data || stat(path, &ids[i]) != 0) {
            cand[i] = false;       /* reading it will say why */
            continue;
        }
        s.owner = i;
        for (size_t k = 0; sl_lockreaders[k]; k++) {
            const sl_lockreader *r = sl_lockreaders[k];
            if (r->includes && r->recognises(it->base))
                r->includes(path, data, len, proj, found_include, &s);
        }
    }
    if (s.n)
        qsort(s.v, s.n, sizeof *s.v, cmp_incl);
    for (size_t i = 0; i < drv->nitems; i++)
        if (cand[i])
            root[i] = !included(&s, ids, i, NULL, false);
    /* What no root reaches: every file is reachable from some cycle (or
     * file) that nothing outside includes; its first file is read. */
    for (size_t i = 0; i < drv->nitems; i++)
        if (cand[i] && !root[i] && !included(&s, ids, i, root, false) &&
            !included(&s, ids, i, NULL, true))
            root[i] = true;
    free(s.v);
    free(ids);
    free(cand);
}

static bool skipped_dir(const char *name)
{
    for (size_t i = 0; skipped_dirs[i]; i++)
        if (!strcmp(name, skipped_dirs[i]))
            return true;
    return false;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Walk `dir` (as it is to be named: no trailing '/', except "/"): its
 * recognised files first, then its subdirectories, each in bytewise order,
 * so that output and errors do not depend on the file system's order. */
static void walk(driver *drv, const char *dir, int depth)
{
    if (depth > WALK_DEPTH_MAX) {
        report_err(drv, dir, 0, "directory tree too deep (over 128 levels)");
        return;
    }
    DIR *dh = opendir(dir);
    if (!dh) {
        report_err(drv, dir, 0, strerror(errno));
        return;
    }
    const char *prefix = !strcmp(dir, "/") ? "" : dir;
    char **files = NULL, **dirs = NULL;
    size_t nf = 0, nd = 0, capf = 0, capd = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(dh);
        if (!de) {
            if (errno)
                report_err(drv, dir, 0, strerror(errno));
            break;
        }
        const char *name = de->d_name;
        if (!strcmp(name, ".") || !strcmp(name, ".."))
            continue;
        bool want_file = recognised(name);
        bool want_dir = !skipped_dir(name);
        if (!want_file && !want_dir)
            continue;
        char *full = sl_xrealloc(NULL, strlen(prefix) + strlen(name) + 2);
        sprintf(full, "%s/%s", prefix, name);
        unsigned char type = de->d_type;
        struct stat st;
        if (type == DT_UNKNOWN) {
            if (lstat(full, &st) == 0)
                type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG
                                                    : S_ISLNK(st.st_mode) ? DT_LNK : DT_UNKNOWN;
        }
        if (type == DT_LNK) {
            /* A symlinked lockfile is read; a symlinked directory is not
             * entered (it may point anywhere, or back up the tree). */
            type = (want_file && stat(full, &st) == 0 && S_ISREG(st.st_mode)) ? DT_REG
                                                                              : DT_UNKNOWN;
        }
        free(full);
        if (type == DT_REG && want_file) {
            if (nf == capf)
                files = sl_xrealloc(files, (capf = capf ? capf * 2 : 16) * sizeof *files);
            files[nf++] = sl_xstrdup(name);
        } else if (type == DT_DIR && want_dir) {
            if (nd == capd)
                dirs = sl_xrealloc(dirs, (capd = capd ? capd * 2 : 16) * sizeof *dirs);
            dirs[nd++] = sl_xstrdup(name);
        }
    }
    closedir(dh);
    if (nf)
        qsort(files, nf, sizeof *files, cmp_str);
    if (nd)
        qsort(dirs, nd, sizeof *dirs, cmp_str);
    for (size_t i = 0; i < nf; i++)
        add_item(drv, sl_xstrdup(dir), files[i], false);
    for (size_t i = 0; i < nd; i++) {
        char *sub = sl_xrealloc(NULL, strlen(prefix) + strlen(dirs[i]) + 2);
        sprintf(sub, "%s/%s", prefix, dirs[i]);
        walk(drv, sub, depth + 1);
        free(sub);
        free(dirs[i]);
    }
    free(files);
    free(dirs);
}

static void derive_path(driver *drv, const char *arg)
{
    size_t len = strlen(arg);
    while (len > 1 && arg[len - 1] == '/')
        len--;
    char *path = sl_xrealloc(NULL, len + 1);
    memcpy(path, arg, len);
    path[len] = '\0';

    struct stat st;
    if (len == 0 || stat(path, &st) != 0) {
        report_err(drv, arg, 0, len == 0 ? "empty path" : strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        walk(drv, path, 0);
    } else if (S_ISREG(st.st_mode)) {
        char *slash = strrchr(path, '/');
        if (!slash) {
            add_item(drv, sl_xstrdup(""), sl_xstrdup(path), true);
        } else {
            const char *base = slash + 1;
            char *dir = slash == path ? sl_xstrdup("/") : sl_xrealloc(NULL, (size_t)(slash - path) + 1);
            if (slash != path) {
                memcpy(dir, path, (size_t)(slash - path));
                dir[slash - path] = '\0';
            }
            add_item(drv, dir, sl_xstrdup(base), true);
        }
    } else {
        report_err(drv, arg, 0, "not a regular file or directory");
    }
    free(path);
}

int sl_lockfiles_derive(const char *const *paths, size_t npaths, sl_derived *out,
                        void (*report)(void *ctx, const char *msg), void *ctx)
{
    driver drv = { .out = out, .report = report, .ctx = ctx };
    for (size_t i = 0; i < npaths; i++)
        derive_path(&drv, paths[i]);
    /* All files are known before any is read: a file may be included by
     * one that the walk meets later (in a subdirectory, or named after). */
    bool *root = sl_xrealloc(NULL, drv.nitems + 1);
    choose_roots(&drv, root);
    for (size_t i = 0; i < drv.nitems; i++) {
        if (root[i])
            process_file(&drv, drv.items[i].dir, drv.items[i].base, drv.items[i].named);
        free(drv.items[i].dir);
        free(drv.items[i].base);
    }
    free(root);
    free(drv.items);
    for (size_t i = 0; i < drv.nprojects; i++)
        sl_project_free(drv.projects[i]);
    free(drv.projects);
    free(drv.seen);
    free(drv.read);
    for (size_t i = 0; i < drv.nmsgs; i++)
        free(drv.msgs[i].text);
    free(drv.msgs);
    return drv.errors;
}
