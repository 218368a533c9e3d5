/* sfile.h -- the session file: the one on-disk format of a saved
 * conversation (its exact tokens, and what the server keeps beside them),
 * written and read here only. Its two writers are the runtime's sessions
 * (sb_rt_session_save / _load, session.h: a conversation over a model) and
 * the server's session registry (server/sessions.h: named conversations
 * kept between requests); either reads what the other wrote.
 *
 * Version 2, little-endian, no padding:
 *
 *   OFFSET   SIZE   FIELD
 *   0        8      magic "SBSESSN\0"
 *   8        4      version (SB_RT_SFILE_VERSION = 2)
 *   12       4      flags: bit 0 SB_RT_SFILE_CONV, the conversation
 *                   section follows at 40; other bits must be 0
 *   16       16     model identity (sb_rt_model.id); another model's file
 *                   is refused (SB_ERR_LAYOUT_MISMATCH)
 *   32       8      n: tokens
 *   -- the conversation section (flag CONV), 88 bytes ------------------------
 *   40       8      m: marks
 *   48       8      t: text bytes
 *   56       8      turns
 *   64       8      created, unix seconds
 *   72       8      updated, unix seconds
 *   80       48     the last turn: prompt_tokens, cached_tokens,
 *                   cached_disk_tokens, completion_tokens, cache_mode
 *                   (sb_rt_cache_mode), restore time in microseconds
 *                   (6 x u64, sb_rt_sfile_turn)
 *   -- the body, from H = 40 (no section) or H = 128 (CONV) ------------------
 *   H        4n     tokens, u32 each (the committed sequence)
 *   H+4n     16m    marks: (u64 tokens, u64 text bytes), ascending; bit 63
 *                   of tokens (SB_RT_SFILE_PROMPT_END) set: a prompt's end
 *   ...      t      text (UTF-8, what the tokens spell up to the last mark)
 *   end-8    8      XXH3-64 of every byte before it
 *
 * A runtime session writes no section (48 + 4n bytes); the server writes
 * one, with zero marks and no text for a session of token prompts. With
 * n = 2 tokens (7, 300), no section, model id 00 01 .. 0f:
 *
 *   00: 53 42 53 45 53 53 4e 00  02 00 00 00 00 00 00 00  SBSESSN. v2 flags 0
 *   10: 00 01 02 03 04 05 06 07  08 09 0a 0b 0c 0d 0e 0f  model identity
 *   20: 02 00 00 00 00 00 00 00  07 00 00 00 2c 01 00 00  n = 2 | 7, 300
 *   30: 07 f9 47 cc 3b 60 d8 82                           XXH3-64 of 0x00-0x2f
 *
 * Versions read (every earlier file keeps loading; only version 2 is
 * written):
 *   - "SBSESSN\0" version 1 (sb_rt_session_save before version 2): the
 *     layout above with flags 0, so no section;
 *   - "SBSRVSES" version 1 (snapbank serve before version 2): the layout
 *     above with the section always present and flags 0 (its version was
 *     checked as the u64 at 8, so flags had to be 0);
 *   - "SBSESSN\0" version 2: this one.
 * A larger version of either magic is SB_ERR_VERSION (a newer build's
 * file); anything else that fails a check is SB_ERR_FORMAT.
 *
 * Files are replaced atomically (sb_rt_sfile_write): written to PATH.tmp,
 * fsync'd, renamed over PATH, so a crash leaves the old file or the new.
 *
 * Thread safety: no shared state; a struct is used by one thread at a time.
 */
#ifndef SB_RT_SFILE_H
#define SB_RT_SFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rt.h"

#define SB_RT_SFILE_MAGIC "SBSESSN"        /* with its NUL: 8 bytes */
#define SB_RT_SFILE_MAGIC_SRV1 "SBSRVSES"  /* the server's version 1 (read only) */
#define SB_RT_SFILE_VERSION 2u             /* the version written */
#define SB_RT_SFILE_CONV 1u                /* flag: the conversation section */
#define SB_RT_SFILE_ID_BYTES 16u           /* = SB_RT_ID_BYTES */
#define SB_RT_SFILE_HEAD 40u               /* bytes before the section */
#define SB_RT_SFILE_CONV_BYTES 88u         /* the section's bytes */
#define SB_RT_SFILE_PROMPT_END (1ull << 63)/* mark bit: a prompt's end */
#define SB_RT_SFILE_MAX_BYTES (1ull << 34) /* larger files are refused */

/* A point where the tokens and the text agree (server/sessions.h). */
typedef struct sb_rt_sfile_mark {
    uint64_t n_tokens;   /* tokens before the mark; bit 63: a prompt's end */
    uint64_t text_bytes; /* text bytes before the mark */
} sb_rt_sfile_mark;

/* The last turn's figures, as the server reports them. */
typedef struct sb_rt_sfile_turn {
    uint64_t prompt_tokens;
    uint64_t cached_tokens;
    uint64_t cached_disk_tokens;
    uint64_t completion_tokens;
    uint64_t cache_mode;  /* sb_rt_cache_mode */
    uint64_t restore_us;  /* microseconds */
} sb_rt_sfile_turn;

/* A session file's contents. Filled by sb_rt_sfile_read / _decode, whose
 * arrays are owned by the struct (free with sb_rt_sfile_free, or take them
 * and set the pointers to NULL); given to sb_rt_sfile_encode, whose arrays
 * are borrowed for the call. */
typedef struct sb_rt_sfile {
    uint8_t model_id[SB_RT_SFILE_ID_BYTES]; /* the model it was made with */
    uint32_t *tokens;         /* (n_tokens); NULL when n_tokens is 0 */
    size_t n_tokens;
    bool conv;                /* the conversation section is present; the
                                 fields below are zero without it */
    sb_rt_sfile_mark *marks;  /* (n_marks); NULL when n_marks is 0 */
    size_t n_marks;
    char *text;               /* (text_bytes), NUL-terminated when read
                                 with the section; NULL otherwise */
    size_t text_bytes;
    uint64_t turns;           /* turns the conversation has had */
    uint64_t created, updated;/* unix seconds */
    sb_rt_sfile_turn last;    /* the last turn (zeroes before the first) */
} sb_rt_sfile;

/* sb_rt_sfile_encode -- the version 2 bytes of f (the section when
 * f->conv) into *out (malloc'd, caller frees) and *bytes. Returns: SB_OK;
 * SB_ERR_NOMEM (nothing allocated). */
int sb_rt_sfile_encode(const sb_rt_sfile *f, uint8_t **out, size_t *bytes);

/* sb_rt_sfile_decode -- parse b[0, bytes), a file of any version read
 * (above), made with model model_id (16 bytes), into *out (zeroed first;
 * on failure left zeroed). name (the file's path) starts err's message.
 * Returns: SB_OK; SB_ERR_FORMAT (not a session file, truncated, sizes
 * that do not add up, unknown flags, a mark past the end, failing its
 * checksum); SB_ERR_VERSION (a version this build does not read);
 * SB_ERR_LAYOUT_MISMATCH (made with another model); SB_ERR_NOMEM. */
int sb_rt_sfile_decode(const uint8_t *b, size_t bytes, const uint8_t *model_id,
                       const char *name, sb_rt_sfile *out, sb_rt_err *err);

/* sb_rt_sfile_read -- read and decode the file at path (as _decode).
 * Returns: SB_OK; SB_ERR_NOT_FOUND (no file); SB_ERR_IO (cannot open or
 * read it); SB_ERR_FORMAT (also: empty, or larger than
 * SB_RT_SFILE_MAX_BYTES); the other errors of sb_rt_sfile_decode. err
 * names the file and the fault. */
int sb_rt_sfile_read(const char *path, const uint8_t *model_id, sb_rt_sfile *out,
                     sb_rt_err *err);

/* sb_rt_sfile_write -- replace the file at path by b[0, bytes) (from
 * sb_rt_sfile_encode) atomically: PATH.tmp written, fsync'd, renamed over
 * path. Returns: SB_OK; SB_ERR_INVAL (path too long); SB_ERR_IO,
 * SB_ERR_NOSPC (err names the file and the fault; the old file, if any, is
 * left as it was, and PATH.tmp is removed). */
int sb_rt_sfile_write(const char *path, const uint8_t *b, size_t bytes, sb_rt_err *err);

/* sb_rt_sfile_free -- free f's arrays and zero it. NULL is a no-op. */
void sb_rt_sfile_free(sb_rt_sfile *f);

#endif /* SB_RT_SFILE_H */
