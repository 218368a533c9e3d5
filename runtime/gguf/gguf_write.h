/* gguf_write.h -- building GGUF v3 files (the layout gguf.h draws): the
 * model generator's output and the tests' and fuzzers' inputs.
 *
 * Key/values are appended in call order; tensors are laid out in call order
 * in the data section, each at the next multiple of the alignment (32, or
 * a general.alignment u32 given first, by sb_rt_gguf_add_u32 or
 * sb_rt_gguf_add_raw).
 *
 * Thread safety: a writer belongs to one thread.
 */
#ifndef SB_RT_GGUF_WRITE_H
#define SB_RT_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rt.h"

typedef struct sb_rt_gguf_writer sb_rt_gguf_writer;

/* sb_rt_gguf_writer_new -- an empty file. Returns NULL when out of memory.
 * Free with sb_rt_gguf_writer_free (NULL is a no-op). */
sb_rt_gguf_writer *sb_rt_gguf_writer_new(void);
void sb_rt_gguf_writer_free(sb_rt_gguf_writer *w);

/* Appending. A failure (out of memory) is remembered: the write calls then
 * return SB_ERR_NOMEM. Strings are copied; tensor data is borrowed until
 * the file is written. */
void sb_rt_gguf_add_u32(sb_rt_gguf_writer *w, const char *key, uint32_t v);
void sb_rt_gguf_add_i32(sb_rt_gguf_writer *w, const char *key, int32_t v);
void sb_rt_gguf_add_u64(sb_rt_gguf_writer *w, const char *key, uint64_t v);
void sb_rt_gguf_add_f32(sb_rt_gguf_writer *w, const char *key, float v);
void sb_rt_gguf_add_bool(sb_rt_gguf_writer *w, const char *key, bool v);
void sb_rt_gguf_add_str(sb_rt_gguf_writer *w, const char *key, const char *s);
/* An array of n numeric elements of GGUF type `type`, packed (n * size). */
void sb_rt_gguf_add_arr(sb_rt_gguf_writer *w, const char *key, uint32_t type, const void *data,
                        uint64_t n);
/* An array of n strings (s[i] of len[i] bytes). */
void sb_rt_gguf_add_arr_str(sb_rt_gguf_writer *w, const char *key, const char *const *s,
                            const size_t *len, uint64_t n);
/* Any key with raw value bytes (type, then exactly the value's encoding):
 * for tests that build malformed files. */
void sb_rt_gguf_add_raw(sb_rt_gguf_writer *w, const char *key, uint32_t type, const void *val,
                        size_t bytes);
void sb_rt_gguf_add_tensor(sb_rt_gguf_writer *w, const char *name, uint32_t n_dims,
                           const uint64_t *ne, uint32_t type, const void *data, uint64_t bytes);

/* sb_rt_gguf_write_mem -- the file into a malloc'd buffer (*out, *len; the
 * caller frees). Returns: SB_OK; SB_ERR_NOMEM. */
int sb_rt_gguf_write_mem(const sb_rt_gguf_writer *w, uint8_t **out, size_t *len);

/* sb_rt_gguf_write_file -- the file at path (written under path.tmp, then
 * renamed: a failure leaves no partial file at path).
 * Returns: SB_OK; SB_ERR_NOMEM; SB_ERR_IO (err names the path). */
int sb_rt_gguf_write_file(const sb_rt_gguf_writer *w, const char *path, sb_rt_err *err);

#endif /* SB_RT_GGUF_WRITE_H */
