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
#include "rules.h"
#include "text.h"

#define KEY_CAP 272                /* sl_entry_format needs >= 270 for a host entry */

/* One entry, kept small: a lockfile of 100,000 packages makes as many
 * rules. The sl_entry a caller sees is made from it on demand
 * (sl_derived_entry), with the host from d->hosts. */
typedef struct dentry {
    char *key;                     /* the line as printed, without comment (and, for a rule, without
                                      digests): "host:port" or "GET host:port/path" */
    const char *path;              /* rules: into key */
    const char *file1;             /* the first file (interned) */
    const char **files;            /* all of them, once there is more than one; else NULL */
    uint32_t nfiles, capfiles;
    char **digests;                /* rules: SRI strings, first-seen order */
    uint32_t ndigests, capdigests;
    char *note;                    /* in the comment after the files */
    uint32_t host;                 /* index into d->hosts */
    int port;
    bool rule;
} dentry;

/* A fallback with a path, decided when printing (resolve_fallbacks). */
typedef struct fallback {
    sl_host host;
    int port;
    char *path;
    const char *file;              /* interned */
    char *why;
} fallback;

/* Open addressing, key -> index + 1 (0: empty slot), for the entries and
 * for the set of host:port that have rules. */
typedef struct table {
    size_t *slots;
    size_t nslots;
} table;

struct sl_derived {
    dentry *v;
    size_t n, cap;
    table keys;
    /* the hosts the entries name, one copy each */
    sl_host *hosts;
    size_t nhosts, caphosts;
    table host_keys;
    sl_entry scratch;              /* what sl_derived_entry returns */
    /* "host:port" of the hosts with rules */
    char **rulehosts;
    size_t nrulehosts, caprulehosts;
    table rulehost_keys;
    fallback *fb;
    size_t nfb, capfb;
    bool pins;
    /* interned file names */
    char **names;
    char **names_shown;            /* each name as a comment shows it (escaped once, when printing) */
    size_t nnames, capnames;
    const char *last_name;
    /* rules: the last host one was added for (readers add many for one
     * registry in a row), so that it is parsed and formatted once */
    struct {
        char raw[SL_HOST_MAX + 3];
        size_t raw_len;
        int port;
        bool valid, noted;
        sl_host h;
        uint32_t idx;              /* h in d->hosts */
        char text[KEY_CAP];        /* "host:port" as a rule writes it */
    } rh;
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

/* The slot of key in t (empty when absent); keyof(i) gives item i's key. */
static size_t table_slot(const table *t, const char *key, const char *(*keyof)(const sl_derived *, size_t),
                         const sl_derived *d)
{
    size_t s = (size_t)hash_str(key) & (t->nslots - 1);
    while (t->slots[s] && strcmp(keyof(d, t->slots[s] - 1), key) != 0)
        s = (s + 1) & (t->nslots - 1);
    return s;
}

static void table_grow(table *t, size_t n, const char *(*keyof)(const sl_derived *, size_t), const sl_derived *d)
{
    if (t->nslots && (n + 1) * 2 <= t->nslots)
        return;
    size_t ns = t->nslots ? t->nslots * 2 : 64;
    free(t->slots);
    t->slots = sl_xrealloc(NULL, ns * sizeof *t->slots);
    memset(t->slots, 0, ns * sizeof *t->slots);
    t->nslots = ns;
    for (size_t i = 0; i < n; i++)
        t->slots[table_slot(t, keyof(d, i), keyof, d)] = i + 1;
}

static const char *entry_key(const sl_derived *d, size_t i) { return d->v[i].key; }
static const char *host_key(const sl_derived *d, size_t i) { return d->hosts[i].name; }

/* h's index in d->hosts, added if new. */
static uint32_t host_index(sl_derived *d, const sl_host *h)
{
    table_grow(&d->host_keys, d->nhosts, host_key, d);
    size_t s = table_slot(&d->host_keys, h->name, host_key, d);
    if (d->host_keys.slots[s])
        return (uint32_t)(d->host_keys.slots[s] - 1);
    if (d->nhosts == d->caphosts) {
        d->caphosts = d->caphosts ? d->caphosts * 2 : 16;
        d->hosts = sl_xrealloc(d->hosts, d->caphosts * sizeof *d->hosts);
    }
    d->hosts[d->nhosts] = *h;
    d->host_keys.slots[s] = ++d->nhosts;
    return (uint32_t)(d->nhosts - 1);
}
static const char *rulehost_key(const sl_derived *d, size_t i) { return d->rulehosts[i]; }

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
    for (size_t i = 0; i < d->n; i++) {
        dentry *de = &d->v[i];
        free(de->files);
        free(de->key);
        for (size_t k = 0; k < de->ndigests; k++)
            free(de->digests[k]);
        free(de->digests);
        free(de->note);
    }
    free(d->v);
    free(d->keys.slots);
    free(d->hosts);
    free(d->host_keys.slots);
    for (size_t i = 0; i < d->nrulehosts; i++)
        free(d->rulehosts[i]);
    free(d->rulehosts);
    free(d->rulehost_keys.slots);
    for (size_t i = 0; i < d->nfb; i++) {
        free(d->fb[i].path);
        free(d->fb[i].why);
    }
    free(d->fb);
    for (size_t i = 0; i < d->nnames; i++) {
        free(d->names[i]);
        if (d->names_shown)
            free(d->names_shown[i]);
    }
    free(d->names);
    free(d->names_shown);
    free(d->order);
    free(d);
}

void sl_derived_set_pins(sl_derived *d, bool on) { d->pins = on; }
bool sl_derived_pins(const sl_derived *d) { return d->pins; }

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
        d->names_shown = sl_xrealloc(d->names_shown, d->capnames * sizeof *d->names_shown);
    }
    d->names_shown[d->nnames] = NULL;
    d->names[d->nnames] = sl_xstrdup(file);
    return d->last_name = d->names[d->nnames++];
}

/* The index of the entry with this key, created (for the host at index
 * host, its path still to be set by the caller for a rule) if new;
 * *created says which. */
static size_t find_or_add_key(sl_derived *d, const char *key, uint32_t host, int port, bool rule, bool *created)
{
    table_grow(&d->keys, d->n, entry_key, d);
    size_t s = table_slot(&d->keys, key, entry_key, d);
    *created = d->keys.slots[s] == 0;
    if (!*created)
        return d->keys.slots[s] - 1;
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 16;
        d->v = sl_xrealloc(d->v, d->cap * sizeof *d->v);
    }
    dentry *de = &d->v[d->n];
    memset(de, 0, sizeof *de);
    de->host = host;
    de->port = port;
    de->rule = rule;
    de->key = sl_xstrdup(key);
    d->keys.slots[s] = d->n + 1;
    d->sorted = false;
    return d->n++;
}

static size_t find_or_add(sl_derived *d, const sl_host *h, int port)
{
    sl_entry e = { .kind = SL_ENTRY_EXACT, .host = *h, .port = port };
    char key[KEY_CAP];
    sl_entry_format(&e, key, sizeof key);
    bool created;
    return find_or_add_key(d, key, host_index(d, h), port, false, &created);
}

static void add_file(sl_derived *d, dentry *de, const char *file)
{
    const char *name = intern(d, file);
    if (de->nfiles == 0) {
        de->file1 = name;
        de->nfiles = 1;
        return;
    }
    const char *const *all = de->files ? de->files : &de->file1;
    if (all[de->nfiles - 1] == name)
        return;
    for (size_t i = 0; i < de->nfiles; i++)
        if (all[i] == name)
            return;
    if (!de->files) {
        de->capfiles = 4;
        de->files = sl_xrealloc(NULL, de->capfiles * sizeof *de->files);
        de->files[0] = de->file1;
    } else if (de->nfiles == de->capfiles) {
        de->capfiles *= 2;
        de->files = sl_xrealloc(de->files, de->capfiles * sizeof *de->files);
    }
    de->files[de->nfiles++] = name;
}

static const char *const *files_of(const dentry *de)
{
    return de->files ? de->files : &de->file1;
}

/* A rule keeps its first note. A host entry gathers the distinct reasons
 * of the fallbacks that made it (several packages may fall back to one
 * host, each for its own reason), while they fit in a comment. */
#define NOTE_MAX 600

static void set_note(dentry *de, const char *note)
{
    if (!note || !*note)
        return;
    if (!de->note) {
        de->note = sl_xstrdup(note);
        return;
    }
    if (de->rule)
        return;
    size_t have = strlen(de->note), add = strlen(note);
    for (const char *p = de->note; (p = strstr(p, note)) != NULL; p++)
        if ((p == de->note || p[-1] == ' ') && (p[add] == '\0' || p[add] == ';'))
            return;   /* already said */
    if (have >= NOTE_MAX)
        return;
    if (have + 2 + add > NOTE_MAX) {
        if (strcmp(de->note + (have > 5 ? have - 5 : 0), "; ...") != 0) {
            de->note = sl_xrealloc(de->note, have + 6);
            memcpy(de->note + have, "; ...", 6);
        }
        return;
    }
    de->note = sl_xrealloc(de->note, have + 2 + add + 1);
    memcpy(de->note + have, "; ", 2);
    memcpy(de->note + have + 2, note, add + 1);
}

/* The host of a URL or a reader, validated and normalised as an allowlist
 * entry's (IPv6 put in brackets first: URLs give it without). */
static bool parse_host(const char *host, size_t host_len, int port, sl_host *h, char *err, size_t errcap)
{
    if (!host)
        host_len = 0, host = "";
    if (port < 1 || port > 65535) {
        char shown[96];
        snprintf(err, errcap, "invalid port %d for host '%s'", port,
                 sl_display_untrusted(host, host_len, shown, sizeof shown, SL_DISPLAY_HEX));
        return false;
    }
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
    const char *why = NULL;
    if (!sl_host_parse_config(text, text_len, h, &why)) {
        char shown[96];
        snprintf(err, errcap, "invalid host '%s': %s",
                 sl_display_untrusted(host, host_len, shown, sizeof shown, SL_DISPLAY_HEX),
                 why ? why : "not a host name");
        return false;
    }
    return true;
}

bool sl_derived_add(sl_derived *d, const char *host, size_t host_len, int port, const char *file,
                    char *err, size_t errcap)
{
    if (!file)
        file = "";
    if (!host)
        host_len = 0, host = "";
    if (d->last_valid && port == d->last_port && host_len == d->last_raw_len &&
        !memcmp(host, d->last_raw, host_len)) {
        add_file(d, &d->v[d->last_idx], file);
        return true;
    }
    sl_host h;
    if (!parse_host(host, host_len, port, &h, err, errcap))
        return false;
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

/* Parse a URL for a host:port; 1, 0 (no network host) or -1 (err). */
static int url_target(const char *url, size_t len, sl_url *u, char *err, size_t errcap)
{
    if (!sl_url_parse(url, len, u)) {
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
    if (u->port < 0) {
        /* An unusable explicit port, or a scheme with no default (R2). */
        const char *after = u->host + u->host_len, *end = url + len;
        if (after < end && *after == ']')
            after++;
        char shown[224];
        sl_display_untrusted(url, len, shown, sizeof shown, SL_DISPLAY_HEX);
        if (after < end && *after == ':')
            snprintf(err, errcap, "invalid port in URL '%s'", shown);
        else
            snprintf(err, errcap, "no known port for scheme '%s' in URL '%s'", u->scheme, shown);
        return -1;
    }
    return 1;
}

int sl_derived_add_url(sl_derived *d, const char *url, size_t len, const char *file, char *err,
                       size_t errcap)
{
    sl_url u;
    int r = url_target(url, len, &u, err, errcap);
    if (r <= 0)
        return r;
    return sl_derived_add(d, u.host, u.host_len, u.port, file, err, errcap) ? 1 : -1;
}

/* ---- rules ---- */

static void note_rulehost(sl_derived *d, const char *key)
{
    table_grow(&d->rulehost_keys, d->nrulehosts, rulehost_key, d);
    size_t s = table_slot(&d->rulehost_keys, key, rulehost_key, d);
    if (d->rulehost_keys.slots[s])
        return;
    if (d->nrulehosts == d->caprulehosts) {
        d->caprulehosts = d->caprulehosts ? d->caprulehosts * 2 : 16;
        d->rulehosts = sl_xrealloc(d->rulehosts, d->caprulehosts * sizeof *d->rulehosts);
    }
    d->rulehosts[d->nrulehosts] = sl_xstrdup(key);
    d->rulehost_keys.slots[s] = ++d->nrulehosts;
}

/* Whether rules cover host:port ("host:port" as a host entry prints). */
static bool has_rules_key(const sl_derived *d, const char *key)
{
    return d->nrulehosts && d->rulehost_keys.slots[table_slot(&d->rulehost_keys, key, rulehost_key, d)] != 0;
}

static bool has_rules(const sl_derived *d, const sl_host *h, int port)
{
    if (!d->nrulehosts)
        return false;
    char key[KEY_CAP];
    sl_entry host = { .kind = SL_ENTRY_EXACT, .host = *h, .port = port };
    sl_entry_format(&host, key, sizeof key);
    return has_rules_key(d, key);
}

/* The rule's text ("GET host:port/path d1 d2"). */
static char *rule_text(const dentry *de)
{
    size_t n = strlen(de->key) + 1;
    for (size_t i = 0; i < de->ndigests; i++)
        n += 1 + strlen(de->digests[i]);
    char *t = sl_xrealloc(NULL, n);
    size_t off = (size_t)snprintf(t, n, "%s", de->key);
    for (size_t i = 0; i < de->ndigests; i++)
        off += (size_t)snprintf(t + off, n - off, " %s", de->digests[i]);
    return t;
}

/* The host of a rule, parsed and formatted: from the cache when it is the
 * last one again. NULL on an invalid host or port (err). */
static bool rule_host(sl_derived *d, const char *host, size_t host_len, int port, char *err, size_t errcap)
{
    if (d->rh.valid && d->rh.port == port && d->rh.raw_len == host_len && !memcmp(d->rh.raw, host, host_len))
        return true;
    d->rh.valid = false;
    if (!parse_host(host, host_len, port, &d->rh.h, err, errcap))
        return false;
    sl_entry e = { .kind = SL_ENTRY_EXACT, .host = d->rh.h, .port = port };
    sl_entry_format_host(&e, d->rh.text, sizeof d->rh.text);
    d->rh.port = port;
    d->rh.noted = false;
    d->rh.idx = host_index(d, &d->rh.h);
    d->rh.valid = host_len < sizeof d->rh.raw;
    if (d->rh.valid) {
        memcpy(d->rh.raw, host, host_len);
        d->rh.raw_len = host_len;
    }
    return true;
}

/* The same for a host already parsed (fallbacks turned into rules). */
static void rule_host_parsed(sl_derived *d, const sl_host *h, int port)
{
    d->rh.valid = false;   /* raw text unknown: the next add parses again */
    d->rh.h = *h;
    d->rh.port = port;
    d->rh.noted = false;
    d->rh.idx = host_index(d, h);
    sl_entry e = { .kind = SL_ENTRY_EXACT, .host = *h, .port = port };
    sl_entry_format_host(&e, d->rh.text, sizeof d->rh.text);
}

/* A rule for the host in d->rh. */
static bool add_rule_host(sl_derived *d, const char *path, size_t path_len, const char *const *digests,
                          size_t ndigests, const char *file, const char *note, char *err, size_t errcap)
{
    int port = d->rh.port;
    const char *why = sl_path_check(path, path_len, true);
    if (why) {
        char shown[224];
        snprintf(err, errcap, "path '%s' cannot be a rule: %s",
                 sl_display_untrusted(path, path_len, shown, sizeof shown, SL_DISPLAY_HEX), why);
        return false;
    }
    for (size_t i = 0; i < ndigests; i++) {
        const char *bad = sl_digest_check(digests[i], strlen(digests[i]));
        if (bad) {
            char shown[128];
            snprintf(err, errcap, "digest '%s': %s",
                     sl_display_untrusted(digests[i], strlen(digests[i]), shown, sizeof shown, SL_DISPLAY_HEX),
                     bad);
            return false;
        }
    }
    /* The key is the rule without digests: one pattern, one rule (the first
     * rule matching a path decides, so two with the same pattern would
     * leave the second's digests unused). */
    const char *host = d->rh.text;
    size_t hlen = strlen(host), klen = 4 + hlen + path_len + 1;
    char kbuf[512], *key = klen <= sizeof kbuf ? kbuf : sl_xrealloc(NULL, klen);
    memcpy(key, "GET ", 4);
    memcpy(key + 4, host, hlen);
    memcpy(key + 4 + hlen, path, path_len);
    key[klen - 1] = '\0';
    bool created;
    size_t idx = find_or_add_key(d, key, d->rh.idx, port, true, &created);
    if (key != kbuf)
        free(key);
    dentry *de = &d->v[idx];
    if (created) {
        de->path = de->key + 4 + hlen;
        if (!d->rh.noted) {
            note_rulehost(d, host);
            d->rh.noted = true;
        }
    }
    size_t line = 4 + hlen + path_len;
    for (size_t k = 0; k < de->ndigests; k++)
        line += 1 + strlen(de->digests[k]);
    for (size_t i = 0; i < ndigests; i++) {
        bool seen = false;
        for (size_t k = 0; k < de->ndigests && !seen; k++)
            seen = !strcmp(de->digests[k], digests[i]);
        if (seen)
            continue;
        line += 1 + strlen(digests[i]);
        if (line > SL_ENTRY_LINE_MAX || de->ndigests + 2 >= SL_ENTRY_FIELDS_MAX) {
            /* One pattern is one rule (the first match decides), and the
             * gate reads no longer line: an honest error, not a rule it
             * would refuse. */
            char shown[224];
            snprintf(err, errcap, "the rule for '%s' would carry more digests than an allowlist line holds "
                     "(%d bytes, %d fields)", sl_display_untrusted(path, path_len, shown, sizeof shown,
                                                                   SL_DISPLAY_HEX),
                     SL_ENTRY_LINE_MAX, SL_ENTRY_FIELDS_MAX);
            return false;
        }
        if (de->ndigests == de->capdigests) {
            de->capdigests = de->capdigests ? de->capdigests * 2 : 1;
            de->digests = sl_xrealloc(de->digests, de->capdigests * sizeof *de->digests);
        }
        de->digests[de->ndigests++] = sl_xstrdup(digests[i]);
    }
    add_file(d, de, file ? file : "");
    set_note(de, note);
    return true;
}

bool sl_derived_add_rule(sl_derived *d, const char *host, size_t host_len, int port, const char *path,
                         size_t path_len, const char *const *digests, size_t ndigests, const char *file,
                         const char *note, char *err, size_t errcap)
{
    if (!rule_host(d, host, host_len, port, err, errcap))
        return false;
    return add_rule_host(d, path, path_len, digests, ndigests, file, note, err, errcap);
}

/* A URL's path up to its query or fragment; "/" when it has none. */
static void url_path(const sl_url *u, const char **p, size_t *n)
{
    *p = u->path ? u->path : "/";
    *n = u->path ? u->path_len : 1;
    for (size_t i = 0; i < *n; i++)
        if ((*p)[i] == '?' || (*p)[i] == '#') {
            *n = i;
            break;
        }
    if (*n == 0)
        *p = "/", *n = 1;
}

static bool add_fallback_host(sl_derived *d, const sl_host *h, int port, const char *path, size_t path_len,
                              const char *file, const char *why)
{
    if (!path) {
        size_t idx = find_or_add(d, h, port);
        add_file(d, &d->v[idx], file ? file : "");
        set_note(&d->v[idx], why);
        return true;
    }
    if (d->nfb == d->capfb) {
        d->capfb = d->capfb ? d->capfb * 2 : 8;
        d->fb = sl_xrealloc(d->fb, d->capfb * sizeof *d->fb);
    }
    fallback *f = &d->fb[d->nfb++];
    f->host = *h;
    f->port = port;
    f->path = sl_xstrndup(path, path_len);
    f->file = intern(d, file ? file : "");
    f->why = sl_xstrdup(why ? why : "");
    d->sorted = false;
    return true;
}

int sl_derived_add_rule_url(sl_derived *d, const char *url, size_t len, const char *const *digests,
                            size_t ndigests, const char *file, const char *note, char *err, size_t errcap)
{
    sl_url u;
    int r = url_target(url, len, &u, err, errcap);
    if (r <= 0)
        return r;
    if (!rule_host(d, u.host, u.host_len, u.port, err, errcap))
        return -1;
    const char *p;
    size_t n;
    url_path(&u, &p, &n);
    const char *why = memchr(p, '*', n) ? "a '*' in it would be a wildcard" : sl_path_ambiguous(p, n);
    if (why) {
        char because[300];
        snprintf(because, sizeof because, "not pinned: its URL's path cannot be a rule (%s)", why);
        return add_fallback_host(d, &d->rh.h, u.port, NULL, 0, file, because) ? 1 : -1;
    }
    return add_rule_host(d, p, n, digests, ndigests, file, note, err, errcap) ? 1 : -1;
}

bool sl_derived_add_fallback(sl_derived *d, const char *host, size_t host_len, int port, const char *path,
                             size_t path_len, const char *file, const char *why, char *err, size_t errcap)
{
    sl_host h;
    if (!parse_host(host, host_len, port, &h, err, errcap))
        return false;
    if (path && (memchr(path, '*', path_len) || sl_path_ambiguous(path, path_len)))
        path = NULL;   /* no rule can name it: the host entry is all there is */
    return add_fallback_host(d, &h, port, path, path_len, file, why);
}

int sl_derived_add_fallback_url(sl_derived *d, const char *url, size_t len, const char *file, const char *why,
                                char *err, size_t errcap)
{
    sl_url u;
    int r = url_target(url, len, &u, err, errcap);
    if (r <= 0)
        return r;
    const char *p;
    size_t n;
    url_path(&u, &p, &n);
    return sl_derived_add_fallback(d, u.host, u.host_len, u.port, p, n, file, why, err, errcap) ? 1 : -1;
}

/* ---- digests as lockfiles write them ---- */

/* Base64 (RFC 4648, with padding) of at most 64 bytes. Written here: the
 * allowlist library links no crypto library (mbedtls stays in proxy/crypto),
 * and this is the whole of it. */
static void base64(const unsigned char *b, size_t n, char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)b[i] << 16 | (i + 1 < n ? (unsigned)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        out[o++] = i + 1 < n ? a[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? a[v & 63] : '=';
    }
    out[o] = '\0';
}

bool sl_sri_from_hex(const char *alg, size_t alg_len, const char *hex, size_t hex_len, char *out)
{
    static const struct { const char *name; size_t bytes; } algs[] = {
        { "sha256", 32 }, { "sha384", 48 }, { "sha512", 64 },
    };
    for (size_t k = 0; k < 3; k++) {
        if (alg_len != 6 || strncasecmp(alg, algs[k].name, 6) != 0)
            continue;
        if (hex_len != 2 * algs[k].bytes)
            return false;
        unsigned char b[64];
        for (size_t i = 0; i < algs[k].bytes; i++) {
            int hi = sl_hexval((unsigned char)hex[2 * i]), lo = sl_hexval((unsigned char)hex[2 * i + 1]);
            if (hi < 0 || lo < 0)
                return false;
            b[i] = (unsigned char)(hi << 4 | lo);
        }
        memcpy(out, algs[k].name, 6);
        out[6] = '-';
        base64(b, algs[k].bytes, out + 7);
        return true;
    }
    return false;
}

size_t sl_sri_strong(const char *s, size_t len, char (*out)[SL_SRI_MAX], size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < len && n < max;) {
        while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
            i++;
        size_t j = i;
        while (j < len && !(s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r'))
            j++;
        if (j > i && j - i < SL_SRI_MAX && !sl_digest_check(s + i, j - i)) {
            bool seen = false;
            for (size_t k = 0; k < n && !seen; k++)
                seen = strlen(out[k]) == j - i && !memcmp(out[k], s + i, j - i);
            if (!seen) {
                memcpy(out[n], s + i, j - i);
                out[n++][j - i] = '\0';
            }
        }
        i = j;
    }
    return n;
}

/* Fallbacks with a path become unpinned rules on hosts that have rules (a
 * host entry there would be shadowed: rules narrow), host entries
 * elsewhere. Decided once every reader has run: when the entries are
 * first looked at. */
static void resolve_fallbacks(sl_derived *d)
{
    for (size_t i = 0; i < d->nfb; i++) {
        fallback *f = &d->fb[i];
        char err[300];
        if (has_rules(d, &f->host, f->port)) {
            char note[400];
            snprintf(note, sizeof note, "not pinned: %s", f->why);
            rule_host_parsed(d, &f->host, f->port);
            if (add_rule_host(d, f->path, strlen(f->path), NULL, 0, f->file, note, err, sizeof err))
                goto done;
        }
        add_fallback_host(d, &f->host, f->port, NULL, 0, f->file, f->why);
    done:
        free(f->path);
        free(f->why);
    }
    d->nfb = 0;
}

/* A host entry on a host that has rules allows nothing (rules narrow); the
 * comment says so. */
static const char SHADOWED[] = "shadowed: this host has request rules, which alone decide for it";

static bool shadowed(const sl_derived *d, const dentry *de)
{
    return !de->rule && has_rules_key(d, de->key);
}

size_t sl_derived_count(sl_derived *d)
{
    /* Pending fallbacks become entries here, as in sl_derived_entry: a set
     * of fallbacks alone would otherwise count (and print) as empty. */
    if (d->nfb)
        resolve_fallbacks(d);
    return d->n;
}

static int cmp_entry(const void *a, const void *b)
{
    const dentry *x = *(const dentry *const *)a, *y = *(const dentry *const *)b;
    return strcmp(x->key, y->key);
}

/* The comment after a line's text: the files while they fit, then how
 * many more; then the note. */
/* A file name as a comment shows it, escaped once per name. */
static const char *name_shown(sl_derived *d, const char *name)
{
    size_t i = 0;
    while (i < d->nnames && d->names[i] != name)   /* names are few: the files of one run */
        i++;
    if (i == d->nnames)
        return name;   /* not interned: cannot happen */
    if (!d->names_shown[i]) {
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        if (!m)
            abort();
        sl_display_write(m, name, strlen(name), SL_DISPLAY_KEEP_HIGH);
        if (fclose(m) != 0)
            abort();
        d->names_shown[i] = buf;
    }
    return d->names_shown[i];
}

static void put_comment(sl_derived *d, const dentry *de, FILE *out)
{
    size_t used = 0;
    for (size_t k = 0; k < de->nfiles; k++) {
        const char *f = files_of(de)[k];
        size_t need = strlen(f) + 4;
        if (used + need > 900) {
            fprintf(out, "%s(and %zu more)", k ? ", " : "  # ", de->nfiles - k);
            break;
        }
        fputs(k ? ", " : "  # ", out);
        fputs(name_shown(d, f), out);
        used += need;
    }
    const char *note = de->note;
    bool shadow = shadowed(d, de);
    if (note || shadow)
        fputs(de->nfiles ? ": " : "  # ", out);
    if (note)
        sl_display_write(out, note, strlen(note), SL_DISPLAY_KEEP_HIGH);
    if (shadow)
        fprintf(out, "%s%s", note ? "; " : "", SHADOWED);
}

/* The sorted view is rebuilt only after a new entry (which may also move v). */
static void ensure_sorted(sl_derived *d)
{
    if (d->nfb)
        resolve_fallbacks(d);
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
        *files = files_of(de);
    if (nfiles)
        *nfiles = de->nfiles;
    sl_entry *e = &d->scratch;
    *e = (sl_entry){ .kind = SL_ENTRY_EXACT, .host = d->hosts[de->host], .port = de->port, .file = de->file1 };
    if (de->rule) {
        e->methods = "GET";
        e->path = de->path;
        e->digests = (const char **)de->digests;
        e->ndigests = de->ndigests;
    }
    return e;
}

/* A file name in a comment: a control character (a newline above all)
 * would end the comment and let a crafted directory name add an entry of
 * its own to the allowlist. */

void sl_derived_print(sl_derived *d, FILE *out)
{
    size_t n = sl_derived_count(d);
    ensure_sorted(d);
    for (size_t i = 0; i < n; i++) {
        const dentry *de = d->order[i];
        fputs(de->key, out);
        for (size_t k = 0; k < de->ndigests; k++) {
            fputc(' ', out);
            fputs(de->digests[k], out);
        }
        put_comment(d, de, out);
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
    for (size_t i = 0; i < sl_derived_count(d); i++) {
        const char *const *files;
        size_t nfiles;
        const sl_entry *e = sl_derived_entry(d, i, &files, &nfiles);
        const dentry *de = d->order[i];
        json_t *o = json_object();
        if (sl_entry_is_rule(e)) {
            char *t = rule_text(de);
            json_object_set_new(o, "entry", json_text(t));
            free(t);
        } else {
            json_object_set_new(o, "entry", json_text(de->key));
        }
        json_object_set_new(o, "host", json_string(e->host.name));
        json_object_set_new(o, "port", json_integer(e->port));
        if (sl_entry_is_rule(e)) {
            json_object_set_new(o, "method", json_string("GET"));
            json_object_set_new(o, "path", json_text(e->path));
            json_t *da = json_array();
            for (size_t k = 0; k < e->ndigests; k++)
                json_array_append_new(da, json_string(e->digests[k]));
            json_object_set_new(o, "digests", da);
        }
        if (de->note && shadowed(d, de)) {
            size_t n = strlen(de->note) + sizeof SHADOWED + 2;
            char *t = sl_xrealloc(NULL, n);
            snprintf(t, n, "%s; %s", de->note, SHADOWED);
            json_object_set_new(o, "note", json_text(t));
            free(t);
        } else if (shadowed(d, de)) {
            json_object_set_new(o, "note", json_string(SHADOWED));
        } else if (de->note) {
            json_object_set_new(o, "note", json_text(de->note));
        }
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
