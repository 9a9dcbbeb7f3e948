/* The Python lockers' TOML lockfiles and config files (pylock.h). */
#include "pylock.h"

#include <string.h>

sl_toml *sl_pytoml_parse(const char *path, const char *data, size_t len, sl_lockerr *err)
{
    char msg[400];
    int line = 0;
    sl_toml *t = sl_toml_parse(data, len, msg, sizeof msg, &line);
    if (!t)
        sl_lockerr_set(err, path, line, "invalid TOML: %s", msg);
    return t;
}

bool sl_pylock_open(sl_pylock *l, const char *path, const char *data, size_t len,
                    const char *table, sl_derived *out, sl_lockerr *err)
{
    *l = (sl_pylock){ .path = path, .out = out, .err = err };
    l->doc = sl_pytoml_parse(path, data, len, err);
    if (!l->doc)
        return false;
    const sl_toml *t = table ? sl_toml_get(l->doc, table) : NULL;
    if (table && (!t || sl_toml_kind_of(t) != SL_TOML_TABLE)) {
        const char *base = strrchr(path, '/');
        sl_lockerr_set(err, path, 0, "not a %s (no [%s] table)", base ? base + 1 : path, table);
        return false;
    }
    return sl_pytoml_tables(l->doc, "package", path, &l->packages, err);
}

void sl_pylock_close(sl_pylock *l)
{
    sl_toml_free(l->doc);
    sl_toml_free(l->pyproject);
    l->doc = l->pyproject = NULL;
    l->packages = NULL;
}

bool sl_pylock_sources(sl_pylock *l, sl_project *proj, const char *dotted,
                       const sl_toml **tables)
{
    *tables = NULL;
    if (!l->pyproject) {
        l->err->msg[0] = '\0';
        l->pyproject = sl_pytoml_project(proj, "pyproject.toml", &l->pyproject_path, l->err);
        if (!l->pyproject && l->err->msg[0])
            return false;
    }
    return sl_pytoml_tables(l->pyproject, dotted, l->pyproject_path, tables, l->err);
}

sl_pyprov sl_pylock_prov(const sl_pylock *l, const char *config)
{
    return (sl_pyprov){ { l->path, config } };
}

bool sl_pylock_result(sl_pylock *l, int r, const char *msg, const char *config, int line)
{
    if (r >= 0)
        return true;
    sl_lockerr_set(l->err, config ? config : l->path, line, "%s", msg);
    return false;
}

bool sl_pylock_add(sl_pylock *l, sl_pyadd_fn *fn, const char *url, const char *config, int line,
                   int *res)
{
    char msg[512];
    sl_pyprov prov = sl_pylock_prov(l, config);
    int r = fn(l->out, url, strlen(url), &prov, msg, sizeof msg);
    if (res)
        *res = r;
    return sl_pylock_result(l, r, msg, config, line);
}

sl_toml *sl_pytoml_project(sl_project *proj, const char *rel, const char **path_out,
                           sl_lockerr *err)
{
    sl_lockerr e = { .msg = "" };
    size_t len;
    const char *path = NULL;
    const char *data = sl_project_file(proj, rel, &len, &path, &e);
    if (path_out)
        *path_out = data || e.msg[0] ? path : NULL;
    if (!data) {
        if (e.msg[0])
            *err = e;
        return NULL;
    }
    return sl_pytoml_parse(path ? path : rel, data, len, err);
}

bool sl_pytoml_tables(const sl_toml *doc, const char *dotted, const char *path,
                      const sl_toml **tables, sl_lockerr *err)
{
    *tables = sl_pytoml_path(doc, dotted);
    if (*tables && sl_toml_kind_of(*tables) != SL_TOML_ARRAY) {
        sl_lockerr_set(err, path, sl_toml_line(*tables), "\"%s\" is not an array of tables",
                       dotted);
        return false;
    }
    return true;
}

const sl_toml *sl_pytoml_path(const sl_toml *t, const char *dotted)
{
    char key[64];
    const char *p = dotted;
    while (t && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof key)
            return NULL;
        memcpy(key, p, n);
        key[n] = '\0';
        t = sl_toml_get(t, key);
        p = dot ? dot + 1 : p + n;
    }
    return t;
}

const char *sl_pytoml_str(const sl_toml *table, const char *key)
{
    size_t len;
    const sl_toml *v = sl_toml_get(table, key);
    const char *s = sl_toml_kind_of(v) == SL_TOML_STRING ? sl_toml_str(v, &len) : NULL;
    return s && strlen(s) == len ? s : NULL;
}
