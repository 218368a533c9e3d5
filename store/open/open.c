/* open.c -- sb_store_open: a store with its tiers, wired in one place.
 *
 * Opening, step by step (each step's failure returns before the next;
 * a store made in step 3 is closed again on a later failure, which closes
 * the tiers already attached):
 *   1. Arguments, then the bare store's options and the host (store.h).
 *   2. Each tier's options, whether or not the store will have the tier,
 *      so a bad option is refused the same way either way: the disk tier's
 *      (disk.h), then the shared tier's (rtier.h: it names the option on
 *      stderr).
 *   3. The bare store: RAM only (store.h).
 *   4. The disk tier below the index, with a directory or an in-memory
 *      file system (it recovers the index from it).
 *   5. The shared tier, with seeds.
 *   6. Publish: the store lets go of the caller's strings.
 */
#include "open.h"

#include "disk.h"
#include "rtier.h"
#include "store.h"

/* Open a store; with io (tests) its disk tier lives on that in-memory
 * file system, else on cfg->dir when set. */
static int store_open(const sb_config *cfg, sb_io *io, sb_store **out)
{
    /* 1 */
    if (out)
        *out = NULL;
    if (!cfg || !out)
        return SB_ERR_INVAL;
    int rc = sb_store_config_check(cfg);
    if (rc != SB_OK)
        return rc;
    /* 2 */
    if (sb_disk_config_check(cfg) != SB_OK || sb_shared_config_check(cfg) != SB_OK)
        return SB_ERR_INVAL;
    /* 3 */
    sb_store *st;
    if ((rc = sb_store_new(cfg, &st)) != SB_OK)
        return rc;
    /* 4 */
    if (io || (cfg->dir && cfg->dir[0])) {
        rc = sb_disk_open(st, cfg, io);
        if (rc != SB_OK) {
            sb_store_close(st);
            return rc;
        }
    }
    /* 5 */
    if (cfg->shared_seeds && cfg->shared_seeds[0]) {
        rc = sb_shared_open(st, cfg);
        if (rc != SB_OK) {
            sb_store_close(st);
            return rc;
        }
    }
    /* 6 */
    sb_store_publish(st);
    *out = st;
    return SB_OK;
}

int sb_store_open(const sb_config *cfg, sb_store **out)
{
    return store_open(cfg, NULL, out);
}

int sb_store_open_io(const sb_config *cfg, sb_io *io, sb_store **out)
{
    if (!io)
        return SB_ERR_INVAL;
    return store_open(cfg, io, out);
}
