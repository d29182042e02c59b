/* Scan layer: one folder listed and stat'ed in C, for the check pass of a full scan.
 *
 * A full scan without the watching service stats every entry of the tree (about
 * 100,000 lstat calls on a mid-sized project). In Python each costs an os.stat_result
 * of 19 fields, and the digest input built from it as much again. Here one call lists a
 * folder, stats its entries relative to the folder's handle (a folder swapped for a
 * symlink is not followed), and returns the two byte strings the scan digests, built
 * exactly as scan/_list.py builds them in Python (see there): the same folder gives the
 * same keys with or without this module. The listing and the stat calls run without
 * the GIL.
 *
 * list_folder(path, stats=False) -> (names, kinds, sigs, subdirs, files) or None
 *   names:   the entries (str, as os.listdir names them), in the order of the listing
 *   kinds:   the names as bytes, each folder's followed by "/", joined by NUL
 *   sigs:    for each folder: name NUL "d" mode (u32); for each file or symlink:
 *            name NUL "f" mode (u32) size mtime_ns ctime_ns (i64) inode (u64); other
 *            entries (FIFOs, sockets, devices) are not in it; little-endian throughout
 *   subdirs: [(name, permission bits)] of the folders, in listing order
 *   files:   with stats, [(name, mode, size, mtime_ns, ctime_ns, inode, links)] of the
 *            files and symlinks, in listing order (what the walk compares and reads; links
 *            is the hard link count); else None
 * None when an entry cannot be stat'ed (other than gone since the listing) or has a time
 * that does not fit in 64 bits of nanoseconds: the caller lists the folder itself. OSError
 * when the folder cannot be opened or read.
 *
 * check_tree(root, rel, key, excluded, old, index_sig, dirty, fields) -> handed back
 *   The check pass (scan/_check.py) over the folder rel and everything below it, with no
 *   Python a folder: each folder is listed, its listing and stat keys made as
 *   scan/_list.py makes them (the key in force, BLAKE2b in _blake2b.h), and compared with
 *   its record in old (rel -> the cache's tuple; fields: the positions of its listing
 *   key, names left out, ignored folders holding tracked files, stat key and whether it
 *   consulted git's index). A folder whose stat key differs is appended to dirty; its
 *   subfolders not left out are checked the same way. A folder it cannot decide alone is
 *   handed back, [(rel, excluded)], for Python to list: no record, its own ignore files
 *   (they change the rules below it), a listing key that differs (its decisions are made
 *   again), an entry list_folder would hand back, a folder that cannot be opened. So every
 *   folder checked here has the rules and key of rel.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "_blake2b.h"
#ifdef __linux__
#include <sys/syscall.h>
#endif

typedef struct {
    size_t name_at;
    size_t name_len;
    char kind; /* 'd' folder, 'f' file or symlink, 'o' other */
    uint32_t mode;
    int64_t size, mtime_ns, ctime_ns;
    uint64_t ino, nlink;
} entry_t;

typedef struct {
    entry_t *items;
    size_t count, cap;
    char *names;
    size_t names_len, names_cap;
} listing_t;

static void listing_free(listing_t *l) {
    free(l->items);
    free(l->names);
}

/* Grow the arrays for one more entry of name length len; 0 when out of memory. */
static int listing_room(listing_t *l, size_t len) {
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        entry_t *items = realloc(l->items, cap * sizeof(entry_t));
        if (!items) return 0;
        l->items = items;
        l->cap = cap;
    }
    if (l->names_len + len + 1 > l->names_cap) {
        size_t cap = l->names_cap ? l->names_cap : 4096;
        while (l->names_len + len + 1 > cap) cap *= 2;
        char *names = realloc(l->names, cap);
        if (!names) return 0;
        l->names = names;
        l->names_cap = cap;
    }
    return 1;
}

/* A time in nanoseconds since the epoch, as Python's st_mtime_ns; 0 when it does not fit
 * in 64 bits (a year past 2262): the caller lists such a folder in Python. */
static int to_ns(struct timespec t, int64_t *out) {
    int64_t ns;
    if (__builtin_mul_overflow((int64_t)t.tv_sec, (int64_t)1000000000, &ns)) return 0;
    if (__builtin_add_overflow(ns, (int64_t)t.tv_nsec, &ns)) return 0;
    *out = ns;
    return 1;
}

/* Record one entry named name (len bytes) of the folder open at dirfd. Returns 0, or an
 * errno; *unstatable set as list_stat says. An entry gone since the listing is skipped. */
static int add_entry(int dirfd, const char *name, listing_t *l, int *unstatable) {
    if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) return 0;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return 0; /* gone since the listing */
        *unstatable = 1;
        return 0;
    }
    size_t len = strlen(name);
    if (!listing_room(l, len)) return ENOMEM;
    entry_t *t = &l->items[l->count++];
    memcpy(l->names + l->names_len, name, len + 1);
    t->name_at = l->names_len;
    t->name_len = len;
    l->names_len += len + 1;
    mode_t fmt = st.st_mode & S_IFMT;
    t->kind = fmt == S_IFDIR ? 'd' : (fmt == S_IFREG || fmt == S_IFLNK) ? 'f' : 'o';
    t->mode = (uint32_t)st.st_mode;
    t->size = (int64_t)st.st_size;
    t->ino = (uint64_t)st.st_ino;
    t->nlink = (uint64_t)st.st_nlink;
    if (!to_ns(st.st_mtim, &t->mtime_ns) || !to_ns(st.st_ctim, &t->ctime_ns)) *unstatable = 1;
    return 0;
}

#ifdef __linux__
/* The kernel's records as getdents64 writes them (not the C library's struct dirent). */
struct kernel_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* On Linux the folder is read with getdents64 on its handle directly: opendir over a
 * handle (fdopendir) costs a fstat and two fcntl calls a folder, 3 of the ~25 system
 * calls of a folder of 20 files. The buffer holds a few hundred names a call. */
static int read_entries(int fd, listing_t *l, int *unstatable) {
    union {
        char bytes[32768];
        uint64_t align;
    } buf;
    for (;;) {
        long got = syscall(SYS_getdents64, fd, buf.bytes, sizeof buf.bytes);
        if (got < 0) return errno;
        if (got == 0) return 0;
        for (long at = 0; at < got;) {
            struct kernel_dirent64 *e = (struct kernel_dirent64 *)(buf.bytes + at);
            at += e->d_reclen;
            int err = add_entry(fd, e->d_name, l, unstatable);
            if (err) return err;
            if (*unstatable) return 0;
        }
    }
}
#else
static int read_entries(int fd, listing_t *l, int *unstatable) {
    int dup_fd = dup(fd);
    if (dup_fd < 0) return errno;
    DIR *dir = fdopendir(dup_fd);
    if (!dir) {
        int err = errno;
        close(dup_fd);
        return err;
    }
    int err = 0;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(dir);
        if (!e) {
            err = errno;
            break;
        }
        err = add_entry(fd, e->d_name, l, unstatable);
        if (err || *unstatable) break;
    }
    closedir(dir);
    return err;
}
#endif

/* List and stat, without the GIL. Returns 0, or an errno; *unstatable set when an entry
 * could not be stat'ed for another reason than being gone, or has a time out of range. */
static int list_stat(const char *path, listing_t *l, int *unstatable) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno;
    int err = read_entries(fd, l, unstatable);
    close(fd);
    return err;
}

static char *put_le(char *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) {
        *p++ = (char)(v & 0xff);
        v >>= 8;
    }
    return p;
}

static PyObject *build(const listing_t *l, int stats) {
    size_t kinds_len = 0, sigs_len = 0;
    for (size_t i = 0; i < l->count; i++) {
        kinds_len += l->items[i].name_len + 2;
        sigs_len += l->items[i].name_len + 2 + 4 + 32;
    }
    PyObject *names = PyList_New((Py_ssize_t)l->count);
    PyObject *subdirs = PyList_New(0);
    PyObject *files = stats ? PyList_New(0) : Py_NewRef(Py_None);
    PyObject *kinds = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)kinds_len);
    PyObject *sigs = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sigs_len);
    if (!names || !subdirs || !files || !kinds || !sigs) goto fail;
    char *k = PyBytes_AS_STRING(kinds), *s = PyBytes_AS_STRING(sigs);
    for (size_t i = 0; i < l->count; i++) {
        const entry_t *t = &l->items[i];
        const char *name = l->names + t->name_at;
        PyObject *str = PyUnicode_DecodeFSDefaultAndSize(name, (Py_ssize_t)t->name_len);
        if (!str) goto fail;
        PyList_SET_ITEM(names, (Py_ssize_t)i, str);
        if (i) *k++ = 0;
        memcpy(k, name, t->name_len);
        k += t->name_len;
        if (t->kind == 'd') {
            *k++ = '/';
            PyObject *pair = Py_BuildValue("(Ok)", str, (unsigned long)(t->mode & 07777));
            if (!pair) goto fail;
            int bad = PyList_Append(subdirs, pair);
            Py_DECREF(pair);
            if (bad) goto fail;
        }
        if (t->kind == 'o') continue;
        memcpy(s, name, t->name_len);
        s += t->name_len;
        *s++ = 0;
        *s++ = t->kind;
        s = put_le(s, t->mode, 4);
        if (t->kind == 'f' && stats) {
            PyObject *one = Py_BuildValue("(OkLLLKK)", str, (unsigned long)t->mode,
                                          (long long)t->size, (long long)t->mtime_ns,
                                          (long long)t->ctime_ns, (unsigned long long)t->ino,
                                          (unsigned long long)t->nlink);
            if (!one) goto fail;
            int bad = PyList_Append(files, one);
            Py_DECREF(one);
            if (bad) goto fail;
        }
        if (t->kind == 'f') {
            s = put_le(s, (uint64_t)t->size, 8);
            s = put_le(s, (uint64_t)t->mtime_ns, 8);
            s = put_le(s, (uint64_t)t->ctime_ns, 8);
            s = put_le(s, t->ino, 8);
        }
    }
    if (_PyBytes_Resize(&kinds, (Py_ssize_t)(k - PyBytes_AS_STRING(kinds))) < 0) {
        kinds = NULL;
        goto fail;
    }
    if (_PyBytes_Resize(&sigs, (Py_ssize_t)(s - PyBytes_AS_STRING(sigs))) < 0) {
        sigs = NULL;
        goto fail;
    }
    return Py_BuildValue("(NNNNN)", names, kinds, sigs, subdirs, files);
fail:
    Py_XDECREF(names);
    Py_XDECREF(subdirs);
    Py_XDECREF(files);
    Py_XDECREF(kinds);
    Py_XDECREF(sigs);
    return NULL;
}

static PyObject *list_folder(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"path", "stats", NULL};
    PyObject *given = NULL, *path = NULL;
    int stats = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p", keywords, &given, &stats)) return NULL;
    if (!PyUnicode_FSConverter(given, &path)) return NULL;
    listing_t l = {0};
    int unstatable = 0, err;
    Py_BEGIN_ALLOW_THREADS
    err = list_stat(PyBytes_AS_STRING(path), &l, &unstatable);
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (err) {
        errno = err;
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, given);
    } else if (unstatable) {
        out = Py_NewRef(Py_None);
    } else {
        out = build(&l, stats);
    }
    listing_free(&l);
    Py_DECREF(path);
    return out;
}

/* ---- the check pass of a whole subtree (check_tree) -------------------------------- */

/* One digest of the scan (scan/_list.py, _digest): BLAKE2b of 16 bytes over the parts,
 * each followed by a NUL. */
#define KEY_LEN 16

static void key_part(b2b_state *s, const void *data, size_t n) {
    static const char nul = 0;
    b2b_update(s, data, n);
    b2b_update(s, &nul, 1);
}

/* Whether name (len bytes) is one of names, a list of bytes. */
static int named_in(PyObject *names, const char *name, size_t len) {
    Py_ssize_t n = PyList_GET_SIZE(names);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = PyList_GET_ITEM(names, i);
        if ((size_t)PyBytes_GET_SIZE(b) == len && memcmp(PyBytes_AS_STRING(b), name, len) == 0)
            return 1;
    }
    return 0;
}

/* A tuple of str as a new list of their file system bytes; NULL with an exception. */
static PyObject *encoded(PyObject *strs) {
    Py_ssize_t n = PyTuple_GET_SIZE(strs);
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(strs, i);
        PyObject *b = PyUnicode_Check(item) ? PyUnicode_EncodeFSDefault(item) : NULL;
        if (!b) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "a cached name is not a str");
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, b);
    }
    return out;
}

typedef struct {
    char *rel; /* the folder's path below the root, file system bytes, NUL-terminated */
    size_t len;
    int excluded;
} job_t;

typedef struct {
    job_t *items;
    size_t count, cap;
} jobs_t;

static int jobs_push(jobs_t *j, const char *rel, size_t len, const char *name, size_t name_len,
                     int excluded) {
    if (j->count == j->cap) {
        size_t cap = j->cap ? j->cap * 2 : 64;
        job_t *items = realloc(j->items, cap * sizeof(job_t));
        if (!items) return 0;
        j->items = items;
        j->cap = cap;
    }
    size_t total = len + (len && name_len ? 1 : 0) + name_len;
    char *path = malloc(total + 1);
    if (!path) return 0;
    memcpy(path, rel, len);
    if (len && name_len) path[len] = '/';
    memcpy(path + total - name_len, name, name_len);
    path[total] = 0;
    j->items[j->count++] = (job_t){path, total, excluded};
    return 1;
}

/* What check_tree does with one folder: 0 done (its subfolders pushed), 1 handed back to
 * Python, -1 a Python exception. */
static int check_one(const char *root, size_t root_len, const job_t *job, PyObject *rel_str,
                     PyObject *rec, const unsigned char *key, size_t key_len, PyObject *index_sig,
                     const Py_ssize_t *f, PyObject *dirty, jobs_t *todo) {
    if (!rec || !PyTuple_Check(rec)) return 1;
    for (int i = 0; i < 5; i++)
        if (f[i] < 0 || f[i] >= PyTuple_GET_SIZE(rec)) return 1;
    PyObject *old_listing = PyTuple_GET_ITEM(rec, f[0]), *skip = PyTuple_GET_ITEM(rec, f[1]);
    PyObject *partial = PyTuple_GET_ITEM(rec, f[2]), *old_stat = PyTuple_GET_ITEM(rec, f[3]);
    if (!PyBytes_Check(old_listing) || PyBytes_GET_SIZE(old_listing) != KEY_LEN ||
        !PyTuple_Check(skip) || !PyTuple_Check(partial))
        return 1;
    int uses_index = PyObject_IsTrue(PyTuple_GET_ITEM(rec, f[4]));
    if (uses_index < 0) return -1;

    char *path = malloc(root_len + 1 + job->len + 1);
    if (!path) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(path, root, root_len);
    size_t at = root_len;
    if (job->len) {
        path[at++] = '/';
        memcpy(path + at, job->rel, job->len);
        at += job->len;
    }
    path[at] = 0;
    listing_t l = {0};
    int unstatable = 0, err;
    Py_BEGIN_ALLOW_THREADS
    err = list_stat(path, &l, &unstatable);
    Py_END_ALLOW_THREADS
    free(path);
    int out = 1; /* handed back unless every test below passes */
    PyObject *skip_b = NULL, *partial_b = NULL;
    if (err || unstatable) goto done;
    for (size_t i = 0; i < l.count; i++) {
        const char *name = l.names + l.items[i].name_at;
        /* Its own ignore files change the rules below it: Python reads them. */
        if (strcmp(name, ".gitignore") == 0 || strcmp(name, ".takebackignore") == 0) goto done;
    }
    /* The listing key, as Lister._scope makes it: the key in force, whether the folder
     * is excluded, the names with each folder's followed by "/". */
    unsigned char listing[KEY_LEN], stat_key[KEY_LEN];
    b2b_state s;
    b2b_init(&s, KEY_LEN);
    key_part(&s, key, key_len);
    key_part(&s, "x", job->excluded ? 1 : 0);
    for (size_t i = 0; i < l.count; i++) {
        if (i) b2b_update(&s, "", 1);
        b2b_update(&s, l.names + l.items[i].name_at, l.items[i].name_len);
        if (l.items[i].kind == 'd') b2b_update(&s, "/", 1);
    }
    b2b_update(&s, "", 1);
    b2b_final(&s, listing);
    if (uses_index) {
        b2b_init(&s, KEY_LEN);
        key_part(&s, listing, KEY_LEN);
        key_part(&s, PyBytes_AS_STRING(index_sig), (size_t)PyBytes_GET_SIZE(index_sig));
        b2b_final(&s, listing);
    }
    /* Not the names and decisions cached: Python decides them again. */
    if (memcmp(listing, PyBytes_AS_STRING(old_listing), KEY_LEN) != 0) goto done;
    out = -1;
    if (!(skip_b = encoded(skip)) || !(partial_b = encoded(partial))) goto done;
    /* The stat key, as Lister.listing makes it: the key in force, then the entries not
     * left out, each with its kind and stat fields (see the module's head). */
    b2b_init(&s, KEY_LEN);
    key_part(&s, key, key_len);
    for (size_t i = 0; i < l.count; i++) {
        const entry_t *t = &l.items[i];
        const char *name = l.names + t->name_at;
        if (t->kind == 'o' || named_in(skip_b, name, t->name_len)) continue;
        char sig[2 + 4 + 32], *p = sig;
        *p++ = 0;
        *p++ = t->kind;
        p = put_le(p, t->mode, 4);
        if (t->kind == 'f') {
            p = put_le(p, (uint64_t)t->size, 8);
            p = put_le(p, (uint64_t)t->mtime_ns, 8);
            p = put_le(p, (uint64_t)t->ctime_ns, 8);
            p = put_le(p, t->ino, 8);
        }
        b2b_update(&s, name, t->name_len);
        b2b_update(&s, sig, (size_t)(p - sig));
    }
    b2b_update(&s, "", 1);
    b2b_final(&s, stat_key);
    if (!PyBytes_Check(old_stat) || PyBytes_GET_SIZE(old_stat) != KEY_LEN ||
        memcmp(stat_key, PyBytes_AS_STRING(old_stat), KEY_LEN) != 0) {
        if (PyList_Append(dirty, rel_str) < 0) goto done;
    }
    for (size_t i = 0; i < l.count; i++) {
        const entry_t *t = &l.items[i];
        const char *name = l.names + t->name_at;
        if (t->kind != 'd' || named_in(skip_b, name, t->name_len)) continue;
        int excluded = job->excluded || named_in(partial_b, name, t->name_len);
        if (!jobs_push(todo, job->rel, job->len, name, t->name_len, excluded)) {
            PyErr_NoMemory();
            goto done;
        }
    }
    out = 0;
done:
    Py_XDECREF(skip_b);
    Py_XDECREF(partial_b);
    listing_free(&l);
    return out;
}

static PyObject *check_tree(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *root_arg, *rel_arg, *old, *index_sig, *dirty;
    Py_buffer key;
    int excluded;
    Py_ssize_t f[5];
    if (!PyArg_ParseTuple(args, "O&Uy*pO!SO!(nnnnn)", PyUnicode_FSConverter, &root_arg, &rel_arg,
                          &key, &excluded, &PyDict_Type, &old, &index_sig, &PyList_Type, &dirty,
                          &f[0], &f[1], &f[2], &f[3], &f[4]))
        return NULL;
    PyObject *handed = NULL, *rel_b = NULL;
    jobs_t todo = {0};
    if (!(handed = PyList_New(0)) || !(rel_b = PyUnicode_EncodeFSDefault(rel_arg))) goto fail;
    if (!jobs_push(&todo, PyBytes_AS_STRING(rel_b), (size_t)PyBytes_GET_SIZE(rel_b), "", 0,
                   excluded)) {
        PyErr_NoMemory();
        goto fail;
    }
    const char *root = PyBytes_AS_STRING(root_arg);
    size_t root_len = (size_t)PyBytes_GET_SIZE(root_arg);
    while (todo.count) {
        job_t job = todo.items[--todo.count];
        PyObject *rel = PyUnicode_DecodeFSDefaultAndSize(job.rel, (Py_ssize_t)job.len);
        PyObject *rec = rel ? PyDict_GetItemWithError(old, rel) : NULL;
        int got = -1;
        if (rel && (rec || !PyErr_Occurred()))
            got = check_one(root, root_len, &job, rel, rec, key.buf, (size_t)key.len, index_sig, f,
                            dirty, &todo);
        if (got == 1) {
            PyObject *one = Py_BuildValue("(OO)", rel, job.excluded ? Py_True : Py_False);
            if (!one || PyList_Append(handed, one) < 0) got = -1;
            Py_XDECREF(one);
        }
        Py_XDECREF(rel);
        free(job.rel);
        if (got < 0) goto fail;
    }
    goto end;
fail:
    Py_CLEAR(handed);
end:
    while (todo.count) free(todo.items[--todo.count].rel);
    free(todo.items);
    Py_XDECREF(rel_b);
    Py_DECREF(root_arg);
    PyBuffer_Release(&key);
    return handed;
}

static PyObject *digest(PyObject *self, PyObject *parts) {
    (void)self;
    b2b_state s;
    b2b_init(&s, KEY_LEN);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(parts); i++) {
        Py_buffer b;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(parts, i), &b, PyBUF_SIMPLE) < 0) return NULL;
        key_part(&s, b.buf, (size_t)b.len);
        PyBuffer_Release(&b);
    }
    unsigned char out[KEY_LEN];
    b2b_final(&s, out);
    return PyBytes_FromStringAndSize((const char *)out, KEY_LEN);
}

static PyMethodDef methods[] = {
    {"list_folder", (PyCFunction)(void (*)(void))list_folder, METH_VARARGS | METH_KEYWORDS,
     "list_folder(path, stats=False) -> (names, kinds, sigs, subdirs, files) or None: see "
     "the module's source."},
    {"check_tree", check_tree, METH_VARARGS,
     "check_tree(root, rel, key, excluded, old, index_sig, dirty, fields) -> handed back: "
     "see the module's source."},
    {"digest", digest, METH_VARARGS, "digest(*parts) -> the scan's 16-byte digest of parts."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_listing", "One folder listed and stat'ed for the scan.", -1, methods,
};

PyMODINIT_FUNC PyInit__listing(void) { return PyModule_Create(&module); }
