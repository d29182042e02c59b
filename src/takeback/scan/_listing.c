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
 * that does not fit in 64 bits of nanoseconds: the caller lists the folder itself. OSError when the folder cannot be opened or read.
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

/* List and stat, without the GIL. Returns 0, or an errno; *unstatable set when an entry
 * could not be stat'ed for another reason than being gone, or has a time out of range. */
static int list_stat(const char *path, listing_t *l, int *unstatable) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno;
    DIR *dir = fdopendir(fd);
    if (!dir) {
        int err = errno;
        close(fd);
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
        const char *name = e->d_name;
        if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
        struct stat st;
        if (fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT) continue; /* gone since the listing */
            *unstatable = 1;
            break;
        }
        size_t len = strlen(name);
        if (!listing_room(l, len)) {
            err = ENOMEM;
            break;
        }
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
        if (!to_ns(st.st_mtim, &t->mtime_ns) || !to_ns(st.st_ctim, &t->ctime_ns)) {
            *unstatable = 1;
            break;
        }
    }
    closedir(dir);
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

static PyMethodDef methods[] = {
    {"list_folder", (PyCFunction)(void (*)(void))list_folder, METH_VARARGS | METH_KEYWORDS,
     "list_folder(path, stats=False) -> (names, kinds, sigs, subdirs, files) or None: see "
     "the module's source."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_listing", "One folder listed and stat'ed for the scan.", -1, methods,
};

PyMODINIT_FUNC PyInit__listing(void) { return PyModule_Create(&module); }
