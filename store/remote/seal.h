/* seal.h -- the shared tier's secrecy: pool keys derived with a keyed hash
 * and values sealed (encrypted and authenticated) per scope, both from the
 * deployment's secret (sb_config.shared_secret_file), with libsodium.
 *
 * Without the secret a reader of the pool learns nothing of the prompts:
 *
 *   key    sb2:<tag>:<h1>:<h2>       (70 characters, as sb1 keys)
 *            tag = BLAKE2b-64 keyed with the master key over
 *                  "tag" || scope hash (8 bytes, little-endian)
 *            h1 h2 = BLAKE2b-192 keyed with the master key over
 *                  "page" || ns id || content key lo || hi (8 bytes each)
 *          nothing in it can be computed from tokens without the secret,
 *          so a reader cannot test whether a prompt was used; one tag per
 *          scope still lets an ACL pattern (~sb2:<tag>:*) confine a tenant.
 *
 *   value  a sealed box around the plain value of remote.h:
 *
 *     OFFSET  SIZE  FIELD
 *     0       4     magic "sbS1" (73 62 53 31)
 *     4       1     version: 1
 *     5       3     zero
 *     8       24    nonce (random per value)
 *     32      n     the plain value (remote.h) encrypted with
 *                   XChaCha20 (crypto_aead_xchacha20poly1305_ietf)
 *     32+n    16    its Poly1305 tag; the authenticated data is bytes
 *                   [0, 8) and the value's key (70 bytes), so a value
 *                   moved under another key does not open
 *
 *     the AEAD key of a scope: BLAKE2b-256 keyed with the master key over
 *     "value" || scope hash: one scope's key opens nothing of another's.
 *
 * The master key is BLAKE2b-256 of the secret file's bytes (at least 32,
 * at most 4096; the file readable by its owner only).
 *
 * What a holder of the secret can still do: everything a node can --
 * compute any scope's keys and tags, read and decrypt every scope's
 * pages (token IDs and KV state), and write values every node accepts.
 * The secret is the deployment's, not a tenant's: per-tenant ACL users
 * (the key pattern above) are what keep tenants' nodes apart.
 *
 * Thread safety: an sb_seal is read-only after sb_seal_load.
 */
#ifndef SB_SEAL_H
#define SB_SEAL_H

#include <stddef.h>
#include <stdint.h>

#define SB_SEAL_HEAD 32u     /* magic, version, zero, nonce */
#define SB_SEAL_TAG 16u      /* Poly1305 */
#define SB_SEAL_OVERHEAD (SB_SEAL_HEAD + SB_SEAL_TAG)
#define SB_SEAL_VERSION 1u

typedef struct sb_seal {
    uint8_t master[32];      /* BLAKE2b-256 of the secret file */
} sb_seal;

/* sb_seal_load -- read the secret file at path into *out.
 * Returns: SB_OK; SB_ERR_INVAL (the file is unreadable, shorter than 32
 * or longer than 4096 bytes, or readable by others than its owner: err
 * says which); SB_ERR_UNSUPPORTED (libsodium failed to start). */
int sb_seal_load(const char *path, sb_seal *out, char *err, size_t err_len);

/* sb_seal_from_bytes -- *out from the secret's bytes (for tests).
 * Returns: SB_OK; SB_ERR_UNSUPPORTED (libsodium failed to start). */
int sb_seal_from_bytes(const void *secret, size_t len, sb_seal *out);

/* sb_seal_scope_tag -- the tag of a scope (its keys' second field). */
uint64_t sb_seal_scope_tag(const sb_seal *s, uint64_t scope_hash);

/* sb_seal_key -- the key of page key[2] of namespace ns_id in the scope
 * (70 chars, no NUL; the layout above). */
void sb_seal_key(const sb_seal *s, char out[70], uint64_t scope_hash, uint64_t ns_id,
                 const uint64_t key[2]);

/* sb_seal_value -- seal plain[0, n) of the scope for key (70 chars) into
 * a malloc'd *out of n + SB_SEAL_OVERHEAD bytes (the caller frees).
 * Returns: SB_OK; SB_ERR_NOMEM. */
int sb_seal_value(const sb_seal *s, uint64_t scope_hash, const char *key, const void *plain,
                  size_t n, void **out, size_t *out_len);

/* sb_seal_open -- open sealed v[0, n) of the scope for key into a
 * malloc'd *plain of *plain_len bytes (the caller frees).
 * Returns: SB_OK; SB_ERR_CORRUPT (not a sealed value of this version, or
 * its tag does not hold: forged, damaged, another scope's or key's);
 * SB_ERR_NOMEM. */
int sb_seal_open(const sb_seal *s, uint64_t scope_hash, const char *key, const void *v, size_t n,
                 void **plain, size_t *plain_len);

#endif /* SB_SEAL_H */
