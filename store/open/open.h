/* open.h -- opening a store with its tiers: the one place that knows
 * which tiers there are (open.c). Core (store/core) makes a bare RAM store
 * (store.h); each tier checks its options and attaches itself to it
 * (store/disk/disk.h, store/remote/rtier.h); nothing below this folder
 * calls into it.
 *
 * sb_store_open (snapbank.h) is defined here; this header adds the test
 * hook that opens a store on the in-memory file system (and brings core's
 * sb_store_crash, store.h, which drops one as a killed process would).
 *
 * Thread safety: as sb_store_open.
 */
#ifndef SB_OPEN_H
#define SB_OPEN_H

#include "snapbank.h"
#include "store.h"

typedef struct sb_io sb_io; /* store/disk/io.h: a file system backend */

/* sb_store_open_io -- sb_store_open on an in-memory file system (io, an
 * sb_io_mem_new handle, borrowed; cfg->dir is ignored).
 * Returns: as sb_store_open; SB_ERR_INVAL when io is NULL. */
int sb_store_open_io(const sb_config *cfg, sb_io *io, sb_store **out);

#endif /* SB_OPEN_H */
