/* The derived allowlist: host:port entries keyed by their normalised text,
 * each with the files that required it in first-seen order. Readers call
 * sl_derived_add once per locked package, so the common case (the same host
 * again, from the same file) is made cheap: a one-entry cache of the last
 * raw host, and a check of the entry's last file before its whole list. */
#include "derive.h"

#include <ctype.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "growbuf.h"
#include "text.h"

#define KEY_CAP 272                /* sl_entry_format needs >= 270 */

typedef struct dentry {
    sl_entry e;
    char key[KEY_CAP];             /* "host:port" as printed */
    const char **files;            /* interned, first-seen order */
    size_t nfiles, capfiles;
} dentry;

struct sl_derived {
    dentry *v;
    size_t n, cap;
    /* open-addressing hash of key -> index + 1 (0: empty slot) */
    size_t *slots;
    size_t nslots;
    /* interned file names */
    char **names;
    size_t nnames, capnames;
    const char *last_name;
    /* sorted view (indices into v), rebuilt after adds */
    const dentry **order;
    bool sorted;
    /* the last raw host added, and the entry it went to */
    char last_raw[SL_HOST_MAX + 3];
    size_t last_raw_len;
    int last_port;
    size_t last_idx;
    bool last_valid;
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

sl_derived *sl_derived_new(void)
{
    sl_derived *d = sl_xrealloc(NULL, sizeof *d);
    memset(d, 0, sizeof *d);
    d->sorted = true;
    return d;
}

void sl_derived_free(sl_derived *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++)
        free(d->v[i].files);
    free(d->v);
    free(d->slots);
    for (size_t i = 0; i < d->nnames; i++)
        free(d->names[i]);
    free(d->names);
    free(d->order);
    free(d);
}

/* One copy per file name. Lockfiles are few; the last one used is checked
 * first because a reader adds many entries from one file in a row. */
static const char *intern(sl_derived *d, const char *file)
{
    if (d->last_name && !strcmp(d->last_name, file))
        return d->last_name;
    for (size_t i = 0; i < d->nnames; i++)
        if (!strcmp(d->names[i], file))
            return d->last_name = d->names[i];
    if (d->nnames == d->capnames) {
        d->capnames = d->capnames ? d->capnames * 2 : 8;
        d->names = sl_xrealloc(d->names, d->capnames * sizeof *d->names);
    }
    d->names[d->nnames] = sl_xstrdup(file);
    return d->last_name = d->names[d->nnames++];
}

static void rehash(sl_derived *d)
{
    size_t n = d->nslots ? d->nslots * 2 : 64;
    free(d->slots);
    d->slots = sl_xrealloc(NULL, n * sizeof *d->slots);
    memset(d->slots, 0, n * sizeof *d->slots);
    d->nslots = n;
    for (size_t i = 0; i < d->n; i++) {
        size_t s = (size_t)hash_str(d->v[i].key) & (n - 1);
        while (d->slots[s])
            s = (s + 1) & (n - 1);
        d->slots[s] = i + 1;
    }
}

/* The index of the entry with this key, created if new. */
static size_t find_or_add(sl_derived *d, const sl_host *h, int port)
{
    sl_entry e = { .kind = SL_ENTRY_EXACT, .host = *h, .port = port };
    char key[KEY_CAP];
    sl_entry_format(&e, key, sizeof key);

    if (d->nslots == 0 || (d->n + 1) * 2 > d->nslots)
        rehash(d);
    size_t s = (size_t)hash_str(key) & (d->nslots - 1);
    while (d->slots[s]) {
        size_t i = d->slots[s] - 1;
        if (!strcmp(d->v[i].key, key))
            return i;
        s = (s + 1) & (d->nslots - 1);
    }
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 16;
        d->v = sl_xrealloc(d->v, d->cap * sizeof *d->v);
    }
    dentry *de = &d->v[d->n];
    memset(de, 0, sizeof *de);
    de->e = e;
    memcpy(de->key, key, sizeof key);
    d->slots[s] = d->n + 1;
    d->sorted = false;
    return d->n++;
}

static void add_file(sl_derived *d, dentry *de, const char *file)
{
    const char *name = intern(d, file);
    if (de->nfiles && de->files[de->nfiles - 1] == name)
        return;
    for (size_t i = 0; i < de->nfiles; i++)
        if (de->files[i] == name)
            return;
    if (de->nfiles == de->capfiles) {
        de->capfiles = de->capfiles ? de->capfiles * 2 : 4;
        de->files = sl_xrealloc(de->files, de->capfiles * sizeof *de->files);
    }
    de->files[de->nfiles++] = name;
    if (!de->e.file)
        de->e.file = name;
}

bool sl_derived_add(sl_derived *d, const char *host, size_t host_len, int port, const char *file,
                    char *err, size_t errcap)
{
    if (!file)
        file = "";
    if (!host)
        host_len = 0, host = "";
    if (port < 1 || port > 65535) {
        char shown[96];
        snprintf(err, errcap, "invalid port %d for host '%s'", port,
                 sl_display_untrusted(host, host_len, shown, sizeof shown, SL_DISPLAY_HEX));
        return false;
    }
    if (d->last_valid && port == d->last_port && host_len == d->last_raw_len &&
        !memcmp(host, d->last_raw, host_len)) {
        add_file(d, &d->v[d->last_idx], file);
        return true;
    }

    /* The allowlist parser wants IPv6 in brackets; URLs give it without. */
    char buf[SL_HOST_MAX + 3];
    const char *text = host;
    size_t text_len = host_len;
    if (host_len > 0 && host[0] != '[' && memchr(host, ':', host_len)) {
        if (host_len + 2 >= sizeof buf) {
            char shown[96];
            snprintf(err, errcap, "invalid host '%s': too long",
                     sl_display_untrusted(host, host_len, shown, sizeof shown, SL_DISPLAY_HEX));
            return false;
        }
        buf[0] = '[';
        memcpy(buf + 1, host, host_len);
        buf[host_len + 1] = ']';
        text = buf;
        text_len = host_len + 2;
    }
    sl_host h;
    const char *why = NULL;
    if (!sl_host_parse_config(text, text_len, &h, &why)) {
        char shown[96];
        snprintf(err, errcap, "invalid host '%s': %s",
                 sl_display_untrusted(host, host_len, shown, sizeof shown, SL_DISPLAY_HEX),
                 why ? why : "not a host name");
        return false;
    }
    size_t idx = find_or_add(d, &h, port);
    add_file(d, &d->v[idx], file);
    if (host_len < sizeof d->last_raw) {
        memcpy(d->last_raw, host, host_len);
        d->last_raw_len = host_len;
        d->last_port = port;
        d->last_idx = idx;
        d->last_valid = true;
    }
    return true;
}

int sl_derived_add_url(sl_derived *d, const char *url, size_t len, const char *file, char *err,
                       size_t errcap)
{
    sl_url u;
    if (!sl_url_parse(url, len, &u)) {
        /* "scheme://" that is not file:// but did not parse is a broken URL,
         * not a local path: refuse rather than drop it silently. */
        size_t i = 0;
        while (i < len && i < 32 && (isalnum((unsigned char)url[i]) || url[i] == '+' ||
                                     url[i] == '-' || url[i] == '.'))
            i++;
        bool has_scheme = i > 0 && isalpha((unsigned char)url[0]) && i + 3 <= len &&
                          !memcmp(url + i, "://", 3);
        bool local = has_scheme && i >= 4 && !strncasecmp(url + i - 4, "file", 4) &&
                    (i == 4 || url[i - 5] == '+');
        if (!has_scheme || local)
            return 0;
        char shown[224];
        snprintf(err, errcap, "invalid URL '%s'",
                 sl_display_untrusted(url, len, shown, sizeof shown, SL_DISPLAY_HEX));
        return -1;
    }
    if (u.port < 0) {
        /* An unusable explicit port, or a scheme with no default (R2). */
        const char *after = u.host + u.host_len, *end = url + len;
        if (after < end && *after == ']')
            after++;
        char shown[224];
        sl_display_untrusted(url, len, shown, sizeof shown, SL_DISPLAY_HEX);
        if (after < end && *after == ':')
            snprintf(err, errcap, "invalid port in URL '%s'", shown);
        else
            snprintf(err, errcap, "no known port for scheme '%s' in URL '%s'", u.scheme, shown);
        return -1;
    }
    return sl_derived_add(d, u.host, u.host_len, u.port, file, err, errcap) ? 1 : -1;
}

size_t sl_derived_count(const sl_derived *d)
{
    return d->n;
}

static int cmp_entry(const void *a, const void *b)
{
    const dentry *x = *(const dentry *const *)a, *y = *(const dentry *const *)b;
    return strcmp(x->key, y->key);
}

/* The sorted view is rebuilt only after a new entry (which may also move v). */
static void ensure_sorted(sl_derived *d)
{
    if (d->sorted)
        return;
    d->order = sl_xrealloc(d->order, d->n * sizeof *d->order);
    for (size_t i = 0; i < d->n; i++)
        d->order[i] = &d->v[i];
    if (d->n)
        qsort(d->order, d->n, sizeof *d->order, cmp_entry);
    d->sorted = true;
}

const sl_entry *sl_derived_entry(sl_derived *d, size_t i, const char *const **files, size_t *nfiles)
{
    if (i >= d->n)
        return NULL;
    ensure_sorted(d);
    const dentry *de = d->order[i];
    if (files)
        *files = de->files;
    if (nfiles)
        *nfiles = de->nfiles;
    return &de->e;
}

/* A file name in a comment: a control character (a newline above all)
 * would end the comment and let a crafted directory name add an entry of
 * its own to the allowlist. */
static void put_comment_text(const char *s, FILE *out)
{
    sl_display_write(out, s, strlen(s), SL_DISPLAY_KEEP_HIGH);
}

void sl_derived_print(sl_derived *d, FILE *out)
{
    for (size_t i = 0; i < d->n; i++) {
        const char *const *files;
        size_t nfiles;
        const sl_entry *e = sl_derived_entry(d, i, &files, &nfiles);
        char text[KEY_CAP];
        fputs(sl_entry_format(e, text, sizeof text), out);
        /* The line must stay within what an allowlist file accepts (1024
         * bytes): name the files while they fit, then say how many more. */
        size_t used = strlen(text);
        for (size_t k = 0; k < nfiles; k++) {
            size_t need = strlen(files[k]) + 4;
            if (used + need > 900) {
                fprintf(out, "%s(and %zu more)", k ? ", " : "  # ", nfiles - k);
                break;
            }
            fputs(k ? ", " : "  # ", out);
            put_comment_text(files[k], out);
            used += need;
        }
        fputc('\n', out);
    }
}

/* jansson refuses strings that are not UTF-8; a file name need not be. */
static json_t *json_text(const char *s)
{
    json_t *j = json_string(s);
    if (j)
        return j;
    char *copy = sl_xstrdup(s);
    for (char *p = copy; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    j = json_string(copy);
    free(copy);
    return j;
}

void sl_derived_print_json(sl_derived *d, FILE *out)
{
    json_t *root = json_object();
    json_t *arr = json_array();
    for (size_t i = 0; i < d->n; i++) {
        const char *const *files;
        size_t nfiles;
        const sl_entry *e = sl_derived_entry(d, i, &files, &nfiles);
        char text[KEY_CAP];
        json_t *o = json_object();
        json_object_set_new(o, "entry", json_string(sl_entry_format(e, text, sizeof text)));
        json_object_set_new(o, "host", json_string(e->host.name));
        json_object_set_new(o, "port", json_integer(e->port));
        json_t *fa = json_array();
        for (size_t k = 0; k < nfiles; k++)
            json_array_append_new(fa, json_text(files[k]));
        json_object_set_new(o, "files", fa);
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "entries", arr);
    json_dumpf(root, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', out);
    json_decref(root);
}
