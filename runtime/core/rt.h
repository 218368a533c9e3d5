/* rt.h -- what every runtime module shares: error reports and the clock.
 *
 * The runtime (GGUF models, tokenizer, kernels, forward pass, sessions)
 * returns snapbank's error codes (enum sb_err in snapbank.h: 0 success,
 * negative failure) and, beside the code, a sentence for a person: which
 * file, which field or offset, what was wrong ("model.gguf: tensor
 * 'blk.0.attn_q.weight': data at offset 4096 runs past the end of the file
 * (size 2048)"). Callers that only need the code pass NULL.
 *
 * Thread safety: an sb_rt_err belongs to one caller; the functions keep no
 * state of their own.
 */
#ifndef SB_RT_H
#define SB_RT_H

#include <stddef.h>

#include "snapbank.h"

#define SB_RT_ERR_MSG 512

/* A failure report: code (an enum sb_err value, 0 when nothing failed) and
 * a NUL-terminated message, truncated to fit. */
typedef struct sb_rt_err {
    int code;
    char msg[SB_RT_ERR_MSG];
} sb_rt_err;

/* sb_rt_fail -- record a failure in e (when e is not NULL): code and the
 * printf-style message. Returns: code, so a caller writes
 * `return sb_rt_fail(e, SB_ERR_FORMAT, "%s: ...", path);`. */
int sb_rt_fail(sb_rt_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* sb_rt_err_clear -- reset e to "no failure" (e may be NULL). */
void sb_rt_err_clear(sb_rt_err *e);

/* sb_rt_now_s -- CLOCK_MONOTONIC seconds: the clock of every duration the
 * runtime, its server and its CLI report. */
double sb_rt_now_s(void);

#endif /* SB_RT_H */
