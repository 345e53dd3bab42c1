/*
 * Files the sample apps read and write: outputs that never lose data, and
 * arrays in NumPy's .npy format.
 *
 * Outputs. An app never writes over its own input (unless it has read all
 * of it first and the user said --force), nor over an existing file unless
 * the user said --force; it writes into a temporary file beside the
 * output and renames it onto the output's name only once every byte is
 * written and synced. A failed write, a full disk or a signal that can be
 * caught (SIGINT, SIGTERM, SIGHUP, SIGXFSZ...) removes the temporary file, so
 * the output's name shows either the old file, or none, or the whole new one.
 *
 * Arrays. A .npy file is a magic string, a version, a Python dict literal
 * ({'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }) and the raw
 * elements in C order. The reader takes versions 1.0, 2.0 and 3.0, either
 * byte order, and checks every field of the header and the data's length;
 * the writer writes version 1.0 in the host's byte order.
 */
#ifndef APPIO_H
#define APPIO_H

#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------------------ */
/* Outputs                                                                   */
/* ------------------------------------------------------------------------ */

/** An output being written; fill it with app_out_open. */
struct app_out {
    const char *prog, *path;
    char *tmp;  /* the temporary file beside path */
    FILE *f;    /* write the contents here */
    int force;  /* replace an existing path */
    int slot;   /* where the signal handler finds tmp */
};

/**
 * Checks that `path` may be written and opens a temporary file beside it:
 * refuses (one line on stderr, -1) a path that is the same file as any of
 * `inputs` (a NULL-terminated list; compared by device and inode, so links
 * count) whether or not `force`, an existing path unless `force`, and a
 * path that is not a regular file. Call it before any work, so that a bad
 * output fails at once.
 */
int app_out_open(struct app_out *o, const char *prog, const char *path,
                 int force, const char *const inputs[]);

/**
 * As app_out_open, for an app that reads all of its inputs into memory
 * before it commits the output: the output may then be one of them (a run
 * that replaces its input with its result). That input is replaced like
 * any existing file, only with `force`, and only on commit: the temporary
 * file is renamed over its name, so a failed run leaves it whole, and an
 * input still open reads its old contents.
 */
int app_out_open_in_place(struct app_out *o, const char *prog,
                          const char *path, int force,
                          const char *const inputs[]);

/**
 * Flushes, syncs and closes the temporary file and renames it onto the
 * output; without force, a file that appeared at that name in the meantime
 * is kept and the call fails. Returns 0, or -1 after one line on stderr,
 * with the temporary file removed.
 */
int app_out_commit(struct app_out *o);

/** Closes and removes the temporary file; the output's name is untouched. */
void app_out_abort(struct app_out *o);

/**
 * Ends an output after the app wrote it: `written` 0 means writing failed
 * (errno says why), so "PROG: cannot write 'PATH': REASON" and the abort;
 * else the commit and "wrote PATH" on stdout. Returns 0, or 2 (the apps'
 * exit status for a file error).
 */
int app_out_finish(struct app_out *o, int written);

/* ------------------------------------------------------------------------ */
/* .npy arrays                                                               */
/* ------------------------------------------------------------------------ */

#define APP_NPY_MAX_DIMS 8

/** An array file opened by app_npy_open, positioned at its data. */
struct app_npy {
    const char *prog, *path;
    FILE *f;
    int ndim;
    uint64_t shape[APP_NPY_MAX_DIMS];
    uint64_t count;   /* elements: the product of shape */
    unsigned item;    /* bytes per element */
    unsigned swap;    /* 0, or the bytes of each scalar to reverse */
};

/**
 * Opens a .npy file whose elements must be `type` ("f4": float32, "c8":
 * complex64, "f8": float64) and which must have `ndim` dimensions (0: any
 * number). Checks the magic, the version, every header field and that the
 * file holds exactly the data the shape says. Returns 0, or -1 after one
 * line on stderr naming the file and what is wrong.
 */
int app_npy_open(struct app_npy *a, const char *prog, const char *path,
                 const char *type, int ndim);

/**
 * Reads the a->count elements into dst (a->count * a->item bytes) in the
 * host's byte order and closes the file. Returns 0, or -1 after one line.
 */
int app_npy_read(struct app_npy *a, void *dst);

/** Closes a file opened by app_npy_open without reading it. */
void app_npy_close(struct app_npy *a);

/**
 * Writes a .npy array of `type` and `shape` (ndim dimensions) from data to
 * f (C order, the host's byte order). Returns 0 or -1 (errno set by the
 * failed write).
 */
int app_npy_write(FILE *f, const char *type, int ndim, const uint64_t *shape,
                  const void *data);

#endif /* APPIO_H */
