/* fuzz_recovery.h -- what fuzz_recovery.c and gen_recovery_seeds.c share:
 * the fixed world of probe sequences, the synthetic state they carry, and
 * the input format's constants (fuzz_recovery.c's head comment describes
 * the format).
 *
 * The world: FR_N_SEQ token sequences over two layouts and two scopes,
 * drawn from a fixed splitmix64 stream, so the generator (which stores some
 * of them) and the harness (which probes all of them) agree without the
 * input having to say what was stored. The state of a token is a pure
 * function of the token prefix ending with it (and of the model string),
 * tests/testutil.c's scheme: whatever a recovered store serves for a
 * prefix can be checked without knowing which puts made the store.
 *
 * Thread safety: every function is reentrant; the world is immutable.
 */
#ifndef SB_FUZZ_RECOVERY_H
#define SB_FUZZ_RECOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapbank.h"

#define FR_N_SEQ 12        /* probe sequences */
#define FR_MAX_TOK 40      /* longest probe sequence */
#define FR_N_LAYOUTS 2
#define FR_N_SCOPES 2

/* Input format (see fuzz_recovery.c). */
#define FR_HEAD_BYTES 4    /* repair, config, drop, puts */
#define FR_REPAIR_SUPER 0x1u   /* recompute superblock slot hashes */
#define FR_REPAIR_RECORDS 0x2u /* recompute record head hashes in .dat files */
#define FR_REPAIR_SUMMARY 0x4u /* recompute summary entry heads and file hash */
#define FR_CFG_SMALL_RAM 0x1u  /* RAM budget 64 KiB instead of 16 MiB */
#define FR_CFG_PUT 0x2u        /* after probing, put two sequences and flush */
#define FR_CFG_SHORT_SEQ 0x4u  /* max_seq_tokens 256 (else 2^20) */
#define FR_CFG_REOPEN 0x8u     /* close, reopen and probe again */
/* File entry name byte: bits 0-2 kind, bits 3-7 segment id (0..31). */
enum { FR_F_SUPER = 0, FR_F_DAT = 1, FR_F_SUM = 2, FR_F_SUPER_TMP = 3, FR_F_SUM_TMP = 4,
       FR_F_LOCK = 5, FR_F__KINDS = 6 };
#define FR_SEG_ID_MAX 31u
#define FR_FILE_MAX (1u << 20) /* a file is cut to this size */

/* One layout of the world (the fields sb_layout needs). */
typedef struct fr_layout {
    const char *model;
    uint32_t page_tokens;
    uint32_t n_tensors;
    uint32_t bpt[2];
    uint32_t point_bytes;
    uint32_t flags;
} fr_layout;

extern const fr_layout fr_layouts[FR_N_LAYOUTS];

typedef struct fr_seq {
    int layout;                /* index into fr_layouts */
    int scope;                 /* 0 or 1: scope "s0" or "s1" */
    bool point;                /* the generator puts it with a point state */
    size_t n;                  /* tokens */
    uint32_t tok[FR_MAX_TOK];
} fr_seq;

/* fr_world -- fill seqs[0, FR_N_SEQ) with the world (always the same). */
void fr_world(fr_seq *seqs);

/* fr_ns_open -- open the namespace of (layout, scope) in st.
 * Returns: sb_ns_open's code. */
int fr_ns_open(sb_store *st, int layout, int scope, sb_ns **out);

/* fr_state -- the state of tokens[0, n) for layout l: bufs[t] receives
 * n * bpt[t] bytes (the caller allocates). */
void fr_state(const fr_layout *l, const uint32_t *tokens, size_t n, uint8_t *const *bufs);

/* fr_point -- the point state at position n (l->point_bytes bytes into out). */
void fr_point(const fr_layout *l, const uint32_t *tokens, size_t n, uint8_t *out);

/* fr_put -- put s (with its point when s->point or the layout requires one).
 * Returns: sb_ns_put's code (or sb_ns_open's, or SB_ERR_NOMEM). */
int fr_put(sb_store *st, const fr_seq *s);

#endif /* SB_FUZZ_RECOVERY_H */
