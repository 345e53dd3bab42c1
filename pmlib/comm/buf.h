/*
 * Message buffers: a growable byte buffer to write messages into and a
 * bounds-checked reader. Integers travel little-endian as the hosts of one
 * job share a byte order (checked at init).
 */
#ifndef PMLIB_COMM_BUF_H
#define PMLIB_COMM_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pm__wbuf {
    unsigned char *p;
    size_t n, cap;
    bool oom;
} pm__wbuf_t;

typedef struct pm__rbuf {
    const unsigned char *p;
    size_t n, pos;
    bool bad; /* read past the end: the message is malformed */
    /* A payload that travels beside the message (comm.h, pm__comm_recv_bulk). */
    struct pm__bulk_in *bulk;
} pm__rbuf_t;

void pm__wbuf_put(pm__wbuf_t *b, const void *data, size_t len);
/* Reserves len bytes and returns where to write them (NULL when out of memory). */
void *pm__wbuf_reserve(pm__wbuf_t *b, size_t len);
static inline void pm__wbuf_u64(pm__wbuf_t *b, uint64_t v) { pm__wbuf_put(b, &v, sizeof v); }
static inline void pm__wbuf_i32(pm__wbuf_t *b, int32_t v) { pm__wbuf_put(b, &v, sizeof v); }
void pm__wbuf_str(pm__wbuf_t *b, const char *s);
void pm__wbuf_free(pm__wbuf_t *b);

const void *pm__rbuf_get(pm__rbuf_t *b, size_t len);
uint64_t pm__rbuf_u64(pm__rbuf_t *b);
int32_t pm__rbuf_i32(pm__rbuf_t *b);
/* Copies a string of at most cap-1 bytes into s. */
void pm__rbuf_str(pm__rbuf_t *b, char *s, size_t cap);

#endif /* PMLIB_COMM_BUF_H */
