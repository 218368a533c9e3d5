/* store.h -- the bare store: a RAM-only store (index, page pool, budgets)
 * that store/open builds a store from, attaching its tiers before it hands
 * the store out.
 *
 * Core opens no tier and names none: store/open/open.c checks the options
 * (core's here, then each tier's), makes the bare store, calls each tier's
 * constructor on it (a constructor sets st->tier or st->shared), and
 * publishes it. Closing needs no wiring: sb_store_close closes the tiers
 * through their tables (tier.h, shared.h).
 *
 * Thread safety: these run before the store is published, on a store no
 * other thread can see; none takes st->mu.
 */
#ifndef SB_STORE_H
#define SB_STORE_H

#include "snapbank.h"

/* sb_store_config_check -- the options of the bare store in cfg (budgets,
 * sequence length, flags, durability and write mode), and the host: the
 * format is little-endian and content keys hash token IDs in host order.
 * The tiers check their own options (store/open).
 * Returns: SB_OK; SB_ERR_UNSUPPORTED (a big-endian host; checked first);
 * SB_ERR_INVAL. */
int sb_store_config_check(const sb_config *cfg);

/* sb_store_new -- a bare store for cfg (checked with sb_store_config_check):
 * RAM only, no namespace, not yet published. It keeps a copy of cfg with
 * dir cleared; the shared tier's strings stay borrowed until
 * sb_store_publish. Free it with sb_store_close (which closes any tier
 * attached meanwhile).
 * Returns: SB_OK (*out set); SB_ERR_NOMEM (*out NULL, nothing left). */
int sb_store_new(const sb_config *cfg, sb_store **out);

/* sb_store_publish -- st has every tier it will have: let go of the
 * borrowed strings of its configuration (shared_seeds, shared_user,
 * shared_password: the caller's, valid during sb_store_open only), so it
 * can be handed out. */
void sb_store_publish(sb_store *st);

/* ---- test hook (not in the public header) ---- */

/* sb_store_crash -- drop a store as a killed process would: the tier stops
 * where it is and nothing more is written; then everything is freed. */
void sb_store_crash(sb_store *st);

#endif /* SB_STORE_H */
