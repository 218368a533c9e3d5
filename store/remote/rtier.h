/* rtier.h -- the shared tier as a store attaches it: its option check and
 * its constructor (rtier.c), which store/open calls while it opens a store.
 * Once attached, the index reaches the tier only through its table
 * (store/core/shared.h).
 *
 * Thread safety: both run before the store is published.
 */
#ifndef SB_RTIER_H
#define SB_RTIER_H

#include "snapbank.h"

/* sb_shared_config_check -- the shared tier's options in cfg, checked for
 * every store. A message naming the option goes to stderr when one is
 * refused.
 * Returns: SB_OK; SB_ERR_INVAL. */
int sb_shared_config_check(const sb_config *cfg);

/* sb_shared_open -- the shared tier's constructor: connect to
 * cfg->shared_seeds (a cluster that does not answer yet is not an error:
 * the tier keeps trying) and start the publisher; sets st->shared. Called
 * by sb_store_open before the store is published.
 * Returns: SB_OK; SB_ERR_INVAL (a seed that is not host:port: a message
 * goes to stderr); SB_ERR_NOMEM. On failure st->shared stays cleared. */
int sb_shared_open(sb_store *st, const sb_config *cfg);

#endif /* SB_RTIER_H */
