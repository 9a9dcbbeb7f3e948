/* Lockfile readers: one per ecosystem behind one interface. A reader takes a
 * file's bytes and the project (to look up its config files, LOCKFILES.md
 * R4) and adds the host:port entries a locked install needs. Readers never
 * touch the network. */
#ifndef SLUICE_LOCKFILE_H
#define SLUICE_LOCKFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "derive.h"

/* An error to report as "FILE:LINE: message" (line 0: no line). */
typedef struct sl_lockerr {
    char file[1024];
    int line;
    char msg[512];
} sl_lockerr;

void sl_lockerr_set(sl_lockerr *e, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The project a lockfile belongs to: its directory and the config files in
 * it, read on demand and kept (so each is read once). */
typedef struct sl_project sl_project;

sl_project *sl_project_new(const char *dir);
void sl_project_free(sl_project *p);
const char *sl_project_dir(const sl_project *p);

/* A file of the project by its path relative to the project directory
 * (".npmrc", ".cargo/config.toml", "gradle/wrapper/gradle-wrapper.properties").
 * Returns its bytes (NUL-terminated, length in *len) or NULL if it does not
 * exist. An unreadable existing file is an error: NULL with err set
 * (check err->msg[0]). *path_out, if given, receives the path to name in
 * messages and provenance. */
const char *sl_project_file(sl_project *p, const char *rel, size_t *len, const char **path_out,
                            sl_lockerr *err);

/* For tests and fuzzers: provide a project file's contents directly. */
void sl_project_put(sl_project *p, const char *rel, const char *data, size_t len);

typedef struct sl_lockreader {
    const char *name;                          /* "npm", "cargo", ... */
    /* Whether this reader handles a file of this base name. */
    bool (*recognises)(const char *basename);
    /* Read one lockfile. `path` names it in errors and provenance. Returns
     * false with err set on malformed input (LOCKFILES.md R7). */
    bool (*read)(const char *path, const char *data, size_t len, sl_project *proj,
                 sl_derived *out, sl_lockerr *err);
    /* The reader analyses the whole project, whichever of its files it is
     * given (Gradle: the settings, build scripts, lockfiles and wrapper of
     * a build; Go: go.mod with go.sum and go.env). The driver calls it once
     * per project directory, with the first of its files it meets. */
    bool per_project;
    /* Optional: the files that reading this one reads too (pip's -r and -c
     * includes, followed all the way), each passed to `found` with the path
     * sl_project_file names it by. Errors are left to read. A file that
     * another file of the same run includes is read only through it (it
     * takes that file's options, LOCKFILES.md "pip"), never on its own. */
    void (*includes)(const char *path, const char *data, size_t len, sl_project *proj,
                     void (*found)(void *ctx, const char *path), void *ctx);
} sl_lockreader;

/* Every reader, NULL-terminated (allowlist/lockfiles/lockfiles.c). */
extern const sl_lockreader *const sl_lockreaders[];

/* The driver: walk PATHs (files or directories), pick readers, apply R8
 * (npm-shrinkwrap.json hides package-lock.json), leave out the files that
 * others of the run include (they are read through those), add everything
 * to out.
 * Errors go to report as "FILE:LINE: message", each distinct message once;
 * returns their count. */
int sl_lockfiles_derive(const char *const *paths, size_t npaths, sl_derived *out,
                        void (*report)(void *ctx, const char *msg), void *ctx);

#endif
