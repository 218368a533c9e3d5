/* gguf.h -- reading GGUF v3 model files (over mmap, or a memory buffer),
 * every field checked against the file before it is used.
 *
 * The format (little-endian; ggml's docs/gguf.md), as this reader takes it:
 *
 *   OFFSET SIZE  FIELD
 *   0      4     magic "GGUF"
 *   4      4     version (u32): 3 (others: SB_ERR_VERSION)
 *   8      8     n_tensors (u64)
 *   16     8     n_kv (u64)
 *   24     ...   n_kv key/values: key (string), type (u32), value
 *          ...   n_tensors infos: name (string), n_dims (u32, 1..4),
 *                ne[n_dims] (u64 each, >= 1), type (u32), offset (u64,
 *                from the data section, a multiple of the alignment)
 *          ...   padding to general.alignment (u32 key, default 32, a power
 *                of two), then the data section
 *
 *   string: u64 length, then that many bytes (no NUL)
 *   value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool,
 *   8 string, 9 array (u32 element type, u64 count, elements), 10 u64,
 *   11 i64, 12 f64. Arrays of arrays are refused (SB_ERR_UNSUPPORTED).
 *
 * Tensor types: every type id GGML defines is read and sized from GGML's
 * block size and bytes (quant.h, sb_rt_ggml_type_size; ne[0] must be a
 * multiple of the block); which of them a model may use is model.c's
 * business. An id GGML does not define (or removed) is SB_ERR_UNSUPPORTED,
 * naming the tensor. Tensors must lie inside the file and not overlap;
 * keys and tensor names must be unique. Counts larger than the bytes left
 * could hold are refused before anything is allocated.
 *
 * Thread safety: an open file is immutable; any thread may read it.
 */
#ifndef SB_RT_GGUF_H
#define SB_RT_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rt.h"

enum sb_rt_gguf_type {
    SB_RT_GGUF_U8 = 0, SB_RT_GGUF_I8 = 1, SB_RT_GGUF_U16 = 2, SB_RT_GGUF_I16 = 3,
    SB_RT_GGUF_U32 = 4, SB_RT_GGUF_I32 = 5, SB_RT_GGUF_F32 = 6, SB_RT_GGUF_BOOL = 7,
    SB_RT_GGUF_STR = 8, SB_RT_GGUF_ARR = 9, SB_RT_GGUF_U64 = 10, SB_RT_GGUF_I64 = 11,
    SB_RT_GGUF_F64 = 12,
};

#define SB_RT_GGUF_VERSION 3u
#define SB_RT_GGUF_MAX_DIMS 4u

typedef struct sb_rt_gguf sb_rt_gguf;

typedef struct sb_rt_gguf_tensor {
    const char *name;          /* NUL-terminated copy, owned by the reader */
    uint32_t n_dims;           /* 1..4 */
    uint64_t ne[4];            /* unused dimensions are 1 */
    uint32_t type;             /* GGML type id (quant.h) */
    const void *data;          /* borrowed into the mapping */
    uint64_t bytes;
} sb_rt_gguf_tensor;

/* sb_rt_gguf_open -- map and check the file at path.
 * On success *out is owned by the caller (sb_rt_gguf_close).
 * Returns: SB_OK; SB_ERR_INVAL; SB_ERR_IO (cannot open or map);
 * SB_ERR_FORMAT (not GGUF, or a field that does not check: err says which
 * and at what offset); SB_ERR_VERSION; SB_ERR_UNSUPPORTED (a tensor type
 * GGML does not define, or a nested array); SB_ERR_NOMEM. */
int sb_rt_gguf_open(const char *path, sb_rt_gguf **out, sb_rt_err *err);

/* sb_rt_gguf_open_mem -- the same over buf[0, len), borrowed until close;
 * name is used in messages. */
int sb_rt_gguf_open_mem(const void *buf, size_t len, const char *name, sb_rt_gguf **out,
                        sb_rt_err *err);

/* sb_rt_gguf_close -- unmap and free. NULL is a no-op. */
void sb_rt_gguf_close(sb_rt_gguf *g);

/* Getters. Returns: SB_OK; SB_ERR_NOT_FOUND (no such key); SB_ERR_FORMAT
 * (another type, or a value that does not fit). Strings and arrays are
 * borrowed until sb_rt_gguf_close; strings are not NUL-terminated. */
int sb_rt_gguf_get_u64(const sb_rt_gguf *g, const char *key, uint64_t *out); /* any
                           integer type with a non-negative value */
int sb_rt_gguf_get_i64(const sb_rt_gguf *g, const char *key, int64_t *out);
int sb_rt_gguf_get_f32(const sb_rt_gguf *g, const char *key, float *out); /* f32 or f64 */
int sb_rt_gguf_get_bool(const sb_rt_gguf *g, const char *key, bool *out);
int sb_rt_gguf_get_str(const sb_rt_gguf *g, const char *key, const char **s, size_t *len);
/* An array: its element type, count, and (numeric arrays) the packed
 * little-endian elements, possibly unaligned; NULL data for strings. */
int sb_rt_gguf_get_arr(const sb_rt_gguf *g, const char *key, uint32_t *type, uint64_t *n,
                       const void **data);
/* Element i of a string array. Returns also SB_ERR_RANGE (i >= count). */
int sb_rt_gguf_arr_str(const sb_rt_gguf *g, const char *key, uint64_t i, const char **s,
                       size_t *len);

/* Key/value enumeration: the count, and key i with its type. */
size_t sb_rt_gguf_n_kv(const sb_rt_gguf *g);
const char *sb_rt_gguf_kv_key(const sb_rt_gguf *g, size_t i, uint32_t *type);

/* Tensors: the count, by index, by name (NULL when absent). */
size_t sb_rt_gguf_n_tensors(const sb_rt_gguf *g);
const sb_rt_gguf_tensor *sb_rt_gguf_tensor_at(const sb_rt_gguf *g, size_t i);
const sb_rt_gguf_tensor *sb_rt_gguf_find_tensor(const sb_rt_gguf *g, const char *name);

#endif /* SB_RT_GGUF_H */
