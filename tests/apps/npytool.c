/*
 * npytool: .npy files for the app tests, written apart from the apps' own
 * reader and writer (apps/common/appio.c), so that each checks the other.
 *
 *   npytool write DESCR SHAPE OUT [VERSION]  numbers on stdin -> OUT
 *   npytool print FILE                       descr, shape, then one scalar
 *                                            per line (complex: re, im)
 *
 * DESCR is '<f4', '>f4', '<c8', '>c8' or '<f8'; SHAPE is "3,4" (or "5");
 * VERSION is 1 (default), 2 or 3. Exit 1 on any error.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int die(const char *what)
{
    fprintf(stderr, "npytool: %s\n", what);
    return 1;
}

/* Stores a scalar of `size` bytes in the byte order `order`. */
static void put(unsigned char *dst, const void *src, int size, char order)
{
    const uint16_t one = 1;
    int little = *(const unsigned char *)&one == 1;

    for (int i = 0; i < size; i++)
        dst[i] = ((const unsigned char *)src)[(order == '<') == little
                                                   ? i : size - 1 - i];
}

static int write_npy(const char *descr, const char *shape, const char *path,
                     int version)
{
    char dict[256], *end;
    int scalar = descr[2] == '8' && descr[1] == 'f' ? 8 : 4;
    size_t count = 1, len, pad, lenbytes = version == 1 ? 2 : 4;
    unsigned char *data = NULL;
    size_t n = 0, cap = 0;
    double v;
    FILE *f;

    for (const char *p = shape; *p; p = *end ? end + 1 : end)
        count *= strtoul(p, &end, 10);
    len = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', "
                           "'fortran_order': False, 'shape': (%s%s), }",
                           descr, shape, strchr(shape, ',') ? "" : ",");
    pad = 64 - (6 + 2 + lenbytes + len + 1) % 64;
    while (scanf("%lf", &v) == 1) {
        if (n + 8 > cap && (data = realloc(data, cap = 2 * cap + 64)) == NULL)
            return die("out of memory");
        if (scalar == 8) {
            put(data + n, &v, 8, descr[0]);
        } else {
            float x = (float)v;

            put(data + n, &x, 4, descr[0]);
        }
        n += (size_t)scalar;
    }
    if (n != count * (descr[1] == 'c' ? 8 : (size_t)scalar))
        return die("the numbers on stdin do not fill the shape");
    if ((f = fopen(path, "wb")) == NULL)
        return die("cannot write the output");
    fwrite("\x93NUMPY", 1, 6, f);
    fputc(version, f);
    fputc(0, f);
    for (size_t i = 0; i < lenbytes; i++)
        fputc((int)(((len + pad + 1) >> (8 * i)) & 0xff), f);
    fwrite(dict, 1, len, f);
    for (size_t i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    if (n > 0)
        fwrite(data, 1, n, f);
    free(data);
    return fclose(f) != 0 ? die("cannot write the output") : 0;
}

static int print_npy(const char *path)
{
    unsigned char pre[12];
    char *head, *d, *s;
    size_t hlen, lenbytes;
    int scalar, little = 1;
    FILE *f = fopen(path, "rb");

    if (f == NULL || fread(pre, 1, 8, f) != 8 || memcmp(pre, "\x93NUMPY", 6))
        return die("not a .npy file");
    lenbytes = pre[6] == 1 ? 2 : 4;
    if (fread(pre + 8, 1, lenbytes, f) != lenbytes)
        return die("short file");
    hlen = pre[8] | (size_t)pre[9] << 8;
    if (lenbytes == 4)
        hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    if ((head = calloc(hlen + 1, 1)) == NULL || fread(head, 1, hlen, f) != hlen)
        return die("short header");
    d = strstr(head, "'descr': '");
    s = strstr(head, "'shape': (");
    if (d == NULL || s == NULL)
        return die("no descr or shape");
    d += 10;
    s += 10;
    printf("descr %.3s\nshape %.*s\n", d, (int)strcspn(s, ")"), s);
    scalar = d[1] == 'f' && d[2] == '8' ? 8 : 4;
    for (;;) {
        unsigned char raw[8], host[8];
        const uint16_t one = 1;

        little = *(const unsigned char *)&one == 1;
        if (fread(raw, 1, (size_t)scalar, f) != (size_t)scalar)
            break;
        for (int i = 0; i < scalar; i++)
            host[i] = raw[(d[0] == '<') == little ? i : scalar - 1 - i];
        if (scalar == 8) {
            double v;

            memcpy(&v, host, 8);
            printf("%.17g\n", v);
        } else {
            float v;

            memcpy(&v, host, 4);
            printf("%.9g\n", (double)v);
        }
    }
    free(head);
    fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && strcmp(argv[1], "write") == 0)
        return write_npy(argv[2], argv[3], argv[4],
                         argc > 5 ? atoi(argv[5]) : 1);
    if (argc == 3 && strcmp(argv[1], "print") == 0)
        return print_npy(argv[2]);
    return die("usage: npytool write DESCR SHAPE OUT [VERSION] | print FILE");
}
