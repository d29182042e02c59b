/* Scan layer: BLAKE2b (RFC 7693), unkeyed, for the native check pass (_listing.c).
 *
 * The scan names each folder by two BLAKE2b digests of 16 bytes (scan/_list.py,
 * ``_digest``: hashlib.blake2b(digest_size=16)); the check pass in C computes the same
 * digests to compare a folder with its cache record without returning to Python. Written
 * from the RFC's description; tests/test_scan_listing.py checks it against hashlib.
 */
#ifndef TAKEBACK_BLAKE2B_H
#define TAKEBACK_BLAKE2B_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint64_t h[8];
    uint64_t t; /* bytes compressed so far (the RFC's counter; its high word stays 0 here) */
    size_t fill;
    size_t outlen;
    unsigned char buf[128];
} b2b_state;

static const uint64_t b2b_iv[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL,
    0xa54ff53a5f1d36f1ULL, 0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL,
    0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const unsigned char b2b_sigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static inline uint64_t b2b_rotr(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

static inline uint64_t b2b_load(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

#define B2B_G(a, b, c, d, x, y)          \
    do {                                 \
        v[a] = v[a] + v[b] + (x);        \
        v[d] = b2b_rotr(v[d] ^ v[a], 32); \
        v[c] = v[c] + v[d];              \
        v[b] = b2b_rotr(v[b] ^ v[c], 24); \
        v[a] = v[a] + v[b] + (y);        \
        v[d] = b2b_rotr(v[d] ^ v[a], 16); \
        v[c] = v[c] + v[d];              \
        v[b] = b2b_rotr(v[b] ^ v[c], 63); \
    } while (0)

/* Mix one 128-byte block into the state; last marks the final block. */
static void b2b_compress(b2b_state *s, const unsigned char *block, int last) {
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++) m[i] = b2b_load(block + 8 * i);
    for (int i = 0; i < 8; i++) {
        v[i] = s->h[i];
        v[i + 8] = b2b_iv[i];
    }
    v[12] ^= s->t;
    if (last) v[14] = ~v[14];
    for (int r = 0; r < 12; r++) {
        const unsigned char *z = b2b_sigma[r];
        B2B_G(0, 4, 8, 12, m[z[0]], m[z[1]]);
        B2B_G(1, 5, 9, 13, m[z[2]], m[z[3]]);
        B2B_G(2, 6, 10, 14, m[z[4]], m[z[5]]);
        B2B_G(3, 7, 11, 15, m[z[6]], m[z[7]]);
        B2B_G(0, 5, 10, 15, m[z[8]], m[z[9]]);
        B2B_G(1, 6, 11, 12, m[z[10]], m[z[11]]);
        B2B_G(2, 7, 8, 13, m[z[12]], m[z[13]]);
        B2B_G(3, 4, 9, 14, m[z[14]], m[z[15]]);
    }
    for (int i = 0; i < 8; i++) s->h[i] ^= v[i] ^ v[i + 8];
}

#undef B2B_G

/* Start a digest of outlen bytes (1 to 64), without a key. */
static void b2b_init(b2b_state *s, size_t outlen) {
    for (int i = 0; i < 8; i++) s->h[i] = b2b_iv[i];
    s->h[0] ^= 0x01010000ULL ^ (uint64_t)outlen;
    s->t = 0;
    s->fill = 0;
    s->outlen = outlen;
}

/* Add n bytes. A full block is compressed only once more input follows it: the last
 * block is compressed by b2b_final, marked as the last. */
static void b2b_update(b2b_state *s, const void *data, size_t n) {
    const unsigned char *p = data;
    while (n > 0) {
        if (s->fill == sizeof s->buf) {
            s->t += sizeof s->buf;
            b2b_compress(s, s->buf, 0);
            s->fill = 0;
        }
        size_t take = sizeof s->buf - s->fill;
        if (take > n) take = n;
        memcpy(s->buf + s->fill, p, take);
        s->fill += take;
        p += take;
        n -= take;
    }
}

/* Write the digest (outlen bytes) to out. */
static void b2b_final(b2b_state *s, unsigned char *out) {
    s->t += s->fill;
    memset(s->buf + s->fill, 0, sizeof s->buf - s->fill);
    b2b_compress(s, s->buf, 1);
    for (size_t i = 0; i < s->outlen; i++) out[i] = (unsigned char)(s->h[i / 8] >> (8 * (i % 8)));
}

#endif
