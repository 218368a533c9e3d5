/* sfile.c -- the session file (sfile.h): encode, decode every version read,
 * and the atomic replace. */
#define _POSIX_C_SOURCE 200809L
#include "session/sfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/le.h"
#include "model/model.h"

_Static_assert(SB_RT_SFILE_ID_BYTES == SB_RT_ID_BYTES, "the file keeps the model's identity");
_Static_assert(SB_RT_SFILE_CONV_BYTES == 11 * 8, "m, t, turns, created, updated, last[6]");

int sb_rt_sfile_encode(const sb_rt_sfile *f, uint8_t **out, size_t *bytes)
{
    size_t head = SB_RT_SFILE_HEAD + (f->conv ? SB_RT_SFILE_CONV_BYTES : 0);
    size_t n_marks = f->conv ? f->n_marks : 0, text = f->conv ? f->text_bytes : 0;
    size_t len = head + 4 * f->n_tokens + 16 * n_marks + text + 8;
    uint8_t *b = calloc(1, len);
    *out = NULL, *bytes = 0;
    if (!b)
        return SB_ERR_NOMEM;
    memcpy(b, SB_RT_SFILE_MAGIC, 8);
    sb_rt_put_le32(b + 8, SB_RT_SFILE_VERSION);
    sb_rt_put_le32(b + 12, f->conv ? SB_RT_SFILE_CONV : 0);
    memcpy(b + 16, f->model_id, SB_RT_SFILE_ID_BYTES);
    sb_rt_put_le64(b + 32, f->n_tokens);
    if (f->conv) {
        const uint64_t conv[11] = { n_marks, text, f->turns, f->created, f->updated,
                                    f->last.prompt_tokens, f->last.cached_tokens,
                                    f->last.cached_disk_tokens, f->last.completion_tokens,
                                    f->last.cache_mode, f->last.restore_us };
        for (int i = 0; i < 11; i++)
            sb_rt_put_le64(b + SB_RT_SFILE_HEAD + 8 * i, conv[i]);
    }
    uint8_t *p = b + head;
    for (size_t i = 0; i < f->n_tokens; i++, p += 4)
        sb_rt_put_le32(p, f->tokens[i]);
    for (size_t i = 0; i < n_marks; i++, p += 16) {
        sb_rt_put_le64(p, f->marks[i].n_tokens);
        sb_rt_put_le64(p + 8, f->marks[i].text_bytes);
    }
    if (text)
        memcpy(p, f->text, text);
    sb_rt_put_le64(b + len - 8, XXH3_64bits(b, len - 8));
    *out = b, *bytes = len;
    return SB_OK;
}

void sb_rt_sfile_free(sb_rt_sfile *f)
{
    if (!f)
        return;
    free(f->tokens);
    free(f->marks);
    free(f->text);
    memset(f, 0, sizeof *f);
}

/* Which version b holds: *conv whether the section is present. Returns:
 * SB_OK, SB_ERR_FORMAT or SB_ERR_VERSION (with err filled). */
static int version_of(const uint8_t *b, const char *name, bool *conv, sb_rt_err *err)
{
    uint32_t version = sb_rt_get_le32(b + 8), flags = sb_rt_get_le32(b + 12);
    if (!memcmp(b, SB_RT_SFILE_MAGIC_SRV1, 8)) { /* snapbank serve's version 1 */
        if (version != 1)
            return sb_rt_fail(err, SB_ERR_VERSION, "%s: server session file version %u, this "
                              "build reads 1", name, version);
        if (flags)
            return sb_rt_fail(err, SB_ERR_FORMAT, "%s: unknown flags %#x", name, flags);
        *conv = true;
        return SB_OK;
    }
    if (memcmp(b, SB_RT_SFILE_MAGIC, 8) != 0)
        return sb_rt_fail(err, SB_ERR_FORMAT, "%s: not a session file (bad magic)", name);
    if (version < 1 || version > SB_RT_SFILE_VERSION)
        return sb_rt_fail(err, SB_ERR_VERSION, "%s: session file version %u, this build reads "
                          "1 to %u", name, version, SB_RT_SFILE_VERSION);
    uint32_t known = version == 1 ? 0 : SB_RT_SFILE_CONV;
    if (flags & ~known)
        return sb_rt_fail(err, SB_ERR_FORMAT, "%s: unknown flags %#x", name, flags);
    *conv = (flags & SB_RT_SFILE_CONV) != 0;
    return SB_OK;
}

int sb_rt_sfile_decode(const uint8_t *b, size_t bytes, const uint8_t *model_id,
                       const char *name, sb_rt_sfile *out, sb_rt_err *err)
{
    memset(out, 0, sizeof *out);
    bool conv = false;
    if (bytes < SB_RT_SFILE_HEAD + 8)
        return sb_rt_fail(err, SB_ERR_FORMAT, "%s: not a session file (%zu bytes)", name, bytes);
    int rc = version_of(b, name, &conv, err);
    if (rc != SB_OK)
        return rc;
    size_t head = SB_RT_SFILE_HEAD + (conv ? SB_RT_SFILE_CONV_BYTES : 0);
    if (bytes < head + 8)
        return sb_rt_fail(err, SB_ERR_FORMAT, "%s: truncated (%zu bytes)", name, bytes);
    uint64_t n = sb_rt_get_le64(b + 32);
    uint64_t m = conv ? sb_rt_get_le64(b + SB_RT_SFILE_HEAD) : 0;
    uint64_t t = conv ? sb_rt_get_le64(b + SB_RT_SFILE_HEAD + 8) : 0;
    if (n > bytes / 4 || m > bytes / 16 || t > bytes || head + 4 * n + 16 * m + t + 8 != bytes)
        return sb_rt_fail(err, SB_ERR_FORMAT, "%s: %llu tokens, %llu marks and %llu text bytes "
                          "recorded but the file holds %zu bytes (truncated or damaged)", name,
                          (unsigned long long)n, (unsigned long long)m, (unsigned long long)t,
                          bytes);
    if (sb_rt_get_le64(b + bytes - 8) != XXH3_64bits(b, bytes - 8))
        return sb_rt_fail(err, SB_ERR_FORMAT, "%s: checksum mismatch (damaged)", name);
    if (memcmp(b + 16, model_id, SB_RT_SFILE_ID_BYTES) != 0)
        return sb_rt_fail(err, SB_ERR_LAYOUT_MISMATCH,
                          "%s: the session was made with another model", name);
    const uint8_t *p = b + head;
    for (uint64_t i = 0; i < m; i++) {
        const uint8_t *q = p + 4 * n + 16 * i;
        if ((sb_rt_get_le64(q) & ~SB_RT_SFILE_PROMPT_END) > n || sb_rt_get_le64(q + 8) > t)
            return sb_rt_fail(err, SB_ERR_FORMAT, "%s: mark %llu past the end", name,
                              (unsigned long long)i);
    }
    if ((n && !(out->tokens = malloc(n * sizeof *out->tokens))) ||
        (m && !(out->marks = malloc(m * sizeof *out->marks))) ||
        (conv && !(out->text = malloc(t + 1)))) {
        sb_rt_sfile_free(out);
        return sb_rt_fail(err, SB_ERR_NOMEM, "%s: out of memory", name);
    }
    memcpy(out->model_id, b + 16, SB_RT_SFILE_ID_BYTES);
    for (size_t i = 0; i < n; i++, p += 4)
        out->tokens[i] = sb_rt_get_le32(p);
    for (size_t i = 0; i < m; i++, p += 16)
        out->marks[i] = (sb_rt_sfile_mark){ sb_rt_get_le64(p), sb_rt_get_le64(p + 8) };
    out->n_tokens = n, out->n_marks = m, out->conv = conv;
    if (conv) {
        memcpy(out->text, p, t);
        out->text[t] = 0;
        out->text_bytes = t;
        uint64_t v[9];
        for (int i = 0; i < 9; i++)
            v[i] = sb_rt_get_le64(b + SB_RT_SFILE_HEAD + 16 + 8 * i);
        out->turns = v[0], out->created = v[1], out->updated = v[2];
        out->last = (sb_rt_sfile_turn){ v[3], v[4], v[5], v[6], v[7], v[8] };
    }
    return SB_OK;
}

int sb_rt_sfile_read(const char *path, const uint8_t *model_id, sb_rt_sfile *out,
                     sb_rt_err *err)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return sb_rt_fail(err, errno == ENOENT ? SB_ERR_NOT_FOUND : SB_ERR_IO,
                          "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int e = errno;
        fclose(f);
        return sb_rt_fail(err, SB_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (st.st_size < SB_RT_SFILE_HEAD + 8 || (uint64_t)st.st_size > SB_RT_SFILE_MAX_BYTES) {
        fclose(f);
        return sb_rt_fail(err, SB_ERR_FORMAT, "%s: not a session file (%lld bytes)", path,
                          (long long)st.st_size);
    }
    size_t bytes = (size_t)st.st_size;
    uint8_t *b = malloc(bytes);
    if (!b) {
        fclose(f);
        return sb_rt_fail(err, SB_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got = fread(b, 1, bytes, f);
    fclose(f);
    int rc = got == bytes ? sb_rt_sfile_decode(b, bytes, model_id, path, out, err)
                          : sb_rt_fail(err, SB_ERR_IO, "%s: short read", path);
    free(b);
    return rc;
}

int sb_rt_sfile_write(const char *path, const uint8_t *b, size_t bytes, sb_rt_err *err)
{
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return sb_rt_fail(err, SB_ERR_INVAL, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        return sb_rt_fail(err, e == ENOSPC ? SB_ERR_NOSPC : SB_ERR_IO, "%s: cannot create: %s",
                          tmp, strerror(e));
    }
    int rc = SB_OK;
    size_t done = 0;
    while (done < bytes) {
        ssize_t w = write(fd, b + done, bytes - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            rc = sb_rt_fail(err, w < 0 && errno == ENOSPC ? SB_ERR_NOSPC : SB_ERR_IO,
                            "%s: write failed: %s", tmp, w < 0 ? strerror(errno) : "short");
            break;
        }
        done += (size_t)w;
    }
    if (rc == SB_OK && fsync(fd) != 0)
        rc = sb_rt_fail(err, SB_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == SB_OK)
        rc = sb_rt_fail(err, SB_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
    if (rc == SB_OK && rename(tmp, path) != 0)
        rc = sb_rt_fail(err, SB_ERR_IO, "%s: cannot rename %s over it: %s", path, tmp,
                        strerror(errno));
    if (rc != SB_OK)
        unlink(tmp);
    return rc;
}
