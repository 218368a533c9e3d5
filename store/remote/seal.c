/* seal.c -- keyed pool keys and sealed values (see seal.h), on libsodium:
 * crypto_generichash (BLAKE2b, keyed) derives, crypto_aead_xchacha20poly1305_ietf
 * seals. */
#include "seal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "snapbank.h"

#define SECRET_MIN 32u
#define SECRET_MAX 4096u

static const uint8_t seal_magic[4] = { 's', 'b', 'S', '1' };

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void set_err(char *err, size_t len, const char *path, const char *why)
{
    if (err && len)
        snprintf(err, len, "shared_secret_file %s: %s", path, why);
}

int sb_seal_from_bytes(const void *secret, size_t len, sb_seal *out)
{
    if (sodium_init() < 0)
        return SB_ERR_UNSUPPORTED;
    crypto_generichash(out->master, sizeof out->master, secret, len, NULL, 0);
    return SB_OK;
}

int sb_seal_load(const char *path, sb_seal *out, char *err, size_t err_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        set_err(err, err_len, path, strerror(errno));
        return SB_ERR_INVAL;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        set_err(err, err_len, path, "not a regular file");
        return SB_ERR_INVAL;
    }
    if (sb.st_mode & 077) {
        close(fd);
        set_err(err, err_len, path, "readable by others than its owner (chmod 600 it)");
        return SB_ERR_INVAL;
    }
    uint8_t buf[SECRET_MAX + 1];
    size_t n = 0;
    for (;;) {
        ssize_t got = read(fd, buf + n, sizeof buf - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n += (size_t)got;
        if (n == sizeof buf)
            break;
    }
    close(fd);
    int rc = SB_OK;
    if (n < SECRET_MIN || n > SECRET_MAX) {
        set_err(err, err_len, path, "want 32 to 4096 bytes (e.g. head -c 32 /dev/urandom)");
        rc = SB_ERR_INVAL;
    } else {
        rc = sb_seal_from_bytes(buf, n, out);
    }
    sodium_memzero(buf, sizeof buf);
    return rc;
}

uint64_t sb_seal_scope_tag(const sb_seal *s, uint64_t scope_hash)
{
    uint8_t in[3 + 8], h[8];
    memcpy(in, "tag", 3);
    put64(in + 3, scope_hash);
    crypto_generichash(h, sizeof h, in, sizeof in, s->master, sizeof s->master);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)h[i] << (8 * i);
    return v;
}

static void hex(char *out, const uint8_t *p, size_t n)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[p[i] >> 4];
        out[2 * i + 1] = d[p[i] & 15];
    }
}

void sb_seal_key(const sb_seal *s, char out[70], uint64_t scope_hash, uint64_t ns_id,
                 const uint64_t key[2])
{
    uint64_t tag = sb_seal_scope_tag(s, scope_hash);
    uint8_t t[8], in[4 + 24], h[24];
    for (int i = 0; i < 8; i++)
        t[i] = (uint8_t)(tag >> (56 - 8 * i));
    memcpy(in, "page", 4);
    put64(in + 4, ns_id);
    put64(in + 12, key[0]);
    put64(in + 20, key[1]);
    crypto_generichash(h, sizeof h, in, sizeof in, s->master, sizeof s->master);
    memcpy(out, "sb2:", 4);
    hex(out + 4, t, 8);
    out[20] = ':';
    hex(out + 21, h, 8);
    out[37] = ':';
    hex(out + 38, h + 8, 16);
}

/* The AEAD key of a scope. */
static void scope_key(const sb_seal *s, uint64_t scope_hash,
                      uint8_t k[crypto_aead_xchacha20poly1305_ietf_KEYBYTES])
{
    uint8_t in[5 + 8];
    memcpy(in, "value", 5);
    put64(in + 5, scope_hash);
    crypto_generichash(k, crypto_aead_xchacha20poly1305_ietf_KEYBYTES, in, sizeof in, s->master,
                       sizeof s->master);
}

/* The authenticated data: the box's first 8 bytes and the key. */
static void make_ad(uint8_t ad[8 + 70], const uint8_t *head, const char *key)
{
    memcpy(ad, head, 8);
    memcpy(ad + 8, key, 70);
}

_Static_assert(SB_SEAL_HEAD == 8 + crypto_aead_xchacha20poly1305_ietf_NPUBBYTES,
               "seal head: 8 bytes then the nonce");
_Static_assert(SB_SEAL_TAG == crypto_aead_xchacha20poly1305_ietf_ABYTES, "seal tag");

int sb_seal_value(const sb_seal *s, uint64_t scope_hash, const char *key, const void *plain,
                  size_t n, void **out, size_t *out_len)
{
    uint8_t *v = malloc(n + SB_SEAL_OVERHEAD);
    if (!v)
        return SB_ERR_NOMEM;
    memcpy(v, seal_magic, 4);
    v[4] = SB_SEAL_VERSION;
    v[5] = v[6] = v[7] = 0;
    randombytes_buf(v + 8, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
    uint8_t k[crypto_aead_xchacha20poly1305_ietf_KEYBYTES], ad[8 + 70];
    scope_key(s, scope_hash, k);
    make_ad(ad, v, key);
    unsigned long long clen = 0;
    crypto_aead_xchacha20poly1305_ietf_encrypt(v + SB_SEAL_HEAD, &clen, plain, n, ad, sizeof ad,
                                               NULL, v + 8, k);
    sodium_memzero(k, sizeof k);
    *out = v;
    *out_len = SB_SEAL_HEAD + (size_t)clen;
    return SB_OK;
}

int sb_seal_open(const sb_seal *s, uint64_t scope_hash, const char *key, const void *v, size_t n,
                 void **plain, size_t *plain_len)
{
    const uint8_t *b = v;
    *plain = NULL;
    *plain_len = 0;
    if (n < SB_SEAL_OVERHEAD || memcmp(b, seal_magic, 4) || b[4] != SB_SEAL_VERSION || b[5] ||
        b[6] || b[7])
        return SB_ERR_CORRUPT;
    size_t pn = n - SB_SEAL_OVERHEAD;
    uint8_t *p = malloc(pn ? pn : 1);
    if (!p)
        return SB_ERR_NOMEM;
    uint8_t k[crypto_aead_xchacha20poly1305_ietf_KEYBYTES], ad[8 + 70];
    scope_key(s, scope_hash, k);
    make_ad(ad, b, key);
    unsigned long long mlen = 0;
    int bad = crypto_aead_xchacha20poly1305_ietf_decrypt(p, &mlen, NULL, b + SB_SEAL_HEAD,
                                                         n - SB_SEAL_HEAD, ad, sizeof ad, b + 8, k);
    sodium_memzero(k, sizeof k);
    if (bad) {
        free(p);
        return SB_ERR_CORRUPT;
    }
    *plain = p;
    *plain_len = (size_t)mlen;
    return SB_OK;
}
