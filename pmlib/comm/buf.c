/* Message buffers. */
#include "comm/buf.h"

#include <stdlib.h>
#include <string.h>

void *pm__wbuf_reserve(pm__wbuf_t *b, size_t len)
{
    if (b->oom)
        return NULL;
    if (b->n + len > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len)
            cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = true;
            return NULL;
        }
        b->p = p;
        b->cap = cap;
    }
    void *at = b->p + b->n;
    b->n += len;
    return at;
}

void pm__wbuf_put(pm__wbuf_t *b, const void *data, size_t len)
{
    void *at = pm__wbuf_reserve(b, len);
    if (at != NULL && len > 0)
        memcpy(at, data, len);
}

void pm__wbuf_str(pm__wbuf_t *b, const char *s)
{
    uint64_t len = strlen(s);
    pm__wbuf_u64(b, len);
    pm__wbuf_put(b, s, len);
}

void pm__wbuf_free(pm__wbuf_t *b)
{
    free(b->p);
    *b = (pm__wbuf_t){0};
}

const void *pm__rbuf_get(pm__rbuf_t *b, size_t len)
{
    if (b->bad || len > b->n - b->pos) {
        b->bad = true;
        return NULL;
    }
    const void *at = b->p + b->pos;
    b->pos += len;
    return at;
}

uint64_t pm__rbuf_u64(pm__rbuf_t *b)
{
    uint64_t v = 0;
    const void *at = pm__rbuf_get(b, sizeof v);
    if (at != NULL)
        memcpy(&v, at, sizeof v);
    return v;
}

int32_t pm__rbuf_i32(pm__rbuf_t *b)
{
    int32_t v = 0;
    const void *at = pm__rbuf_get(b, sizeof v);
    if (at != NULL)
        memcpy(&v, at, sizeof v);
    return v;
}

void pm__rbuf_str(pm__rbuf_t *b, char *s, size_t cap)
{
    uint64_t len = pm__rbuf_u64(b);
    const char *at = pm__rbuf_get(b, len);
    if (at == NULL || len >= cap) {
        b->bad = true;
        s[0] = '\0';
        return;
    }
    memcpy(s, at, len);
    s[len] = '\0';
}
