/* apimodel_int.h -- what apimodel.c (the model and its checks) and
 * apimodel_ops.c (the operations) share; not for the drivers. */
#ifndef SB_APIMODEL_INT_H
#define SB_APIMODEL_INT_H

#include "apimodel.h"

/* Tokens as letters, each ID's index in the vocabulary ("abcde"). */
const char *am_str(const uint32_t *tok, size_t n, char *buf, size_t cap);
#define AM_S(tok, n) am_str((tok), (n), (char[AM_MAX_SEQ + 2]){ 0 }, AM_MAX_SEQ + 2)

void am_trace(am *z, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
unsigned am_pick(am *z, const unsigned *w, unsigned k);

size_t am_regions(const am *z, const am_ns *x, size_t n);
uint32_t am_region_tokens(const am *z, const am_ns *x, size_t n, size_t r);
size_t am_lcp(const uint32_t *a, size_t na, const uint32_t *b, size_t nb);
bool am_guaranteed(const am *z, const am_entry *e);
bool am_point_at(const am *z, const am_ns *x, const uint32_t *tok, size_t L, bool must);
size_t am_point_must(const am *z, const am_ns *x, const uint32_t *tok, size_t n);
bool am_all_must(const am *z, const am_ns *x);
bool am_other_model(const am *z, int xi, const uint32_t *tok, size_t n);
void am_damage(am *z, int xi);

uint64_t am_disk_drops(const am *z, const sb_stats *s);
void am_update_drops(am *z, const sb_stats *s);
bool am_arm(am *z);
void am_disarm(am *z);

/* sb_match_restore_blocks of tokens [0, n) of m through shuffled block
 * tables, gathered back into z->out; returns its code. */
int am_restore_blocks(am *z, int xi, sb_match *m, size_t n);
/* sb_ns_put_blocks of z->buf's positions [from, n) through shuffled block
 * tables; returns its code. */
int am_put_blocks(am *z, int xi, const uint32_t *tok, size_t n, size_t from, const void *point,
                  size_t *stored, sb_write_outcome *oc);
/* How a layered put ended. */
typedef enum am_layered {
    AM_LAYERED_FINISHED,    /* sb_put_finish with every tensor */
    AM_LAYERED_ABORTED,     /* sb_put_abort: nothing stored */
    AM_LAYERED_INCOMPLETE,  /* sb_put_finish refused a missing tensor */
} am_layered;
/* The same through a layered put (sb_ns_put_begin, sb_put_tensors in runs
 * of tensors in a shuffled order, sb_put_finish or sb_put_abort);
 * returns finish's code (begin's when it refused, SB_OK after an abort),
 * *how says which end it took. */
int am_put_layers(am *z, int xi, const uint32_t *tok, size_t n, size_t from, const void *point,
                  size_t *stored, sb_write_outcome *oc, am_layered *how);
int am_restore_checked(am *z, int xi, sb_match *m, const uint32_t *tok, size_t n,
                       bool with_point, const char *what);
sb_match *am_match_checked(am *z, int xi, const am_seq *s, size_t n, sb_match_info *info);
void am_match_restores(am *z, int xi, sb_match *m, const am_seq *s, size_t n,
                       sb_match_info *info);
void am_hold_match(am *z, sb_match *m, int xi, const am_seq *s, size_t n,
                   const sb_match_info *info);
void am_drop_match(am *z, int i);
void am_drop_page(am *z, int i);
void am_hold_page(am *z, sb_page *p, int xi, uint32_t region, uint32_t kv, const uint32_t *tok);
void am_release_all(am *z);
bool am_pin_live(const am *z, const am_pin *p);

void am_follow(am *z, uint64_t t, int state, int xi, size_t ei);
void am_ticket_answer(am *z, am_ticket *k, int rc, const char *what);
/* Damaged reads so far (checksum failures and read errors), and whether
 * followed ticket k may fail for one: a power cut left damaged records and
 * a read met one since k was handed out (the page it holds leaves the
 * index, and a ticket that needs it is never durable). */
uint64_t am_bad_reads(am *z);
bool am_ticket_may_fail(am *z, const am_ticket *k);

void am_layout(const am *z, const am_ns *x, sb_layout *lay);
void am_open_ns(am *z, int xi);
void am_open_store(am *z);
void am_free(am *z);
void am_verify_ns(am *z, int xi, size_t max);
void am_after_op(am *z);

#endif /* SB_APIMODEL_INT_H */
