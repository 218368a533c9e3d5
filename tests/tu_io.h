/* tu_io.h -- the helper of the INTERNAL tests that run a store on the
 * in-memory file system of store/disk/io.h (testutil.h stays on the public
 * API). */
#ifndef SB_TU_IO_H
#define SB_TU_IO_H

#include <stdio.h>

#include "open.h"
#include "testutil.h"
#include "tier.h"

/* Open a store with configuration c on the in-memory file system io
 * (sb_store_open_io), printing the error and failing the test if it does
 * not open. The caller closes the store; io stays the caller's. */
static inline sb_store *tu_open_io(const sb_config *c, sb_io *io)
{
    sb_store *st = NULL;
    int rc = sb_store_open_io(c, io, &st);
    if (rc != SB_OK)
        fprintf(stderr, "open: %s\n", sb_strerror(rc));
    assert_int_equal(rc, SB_OK);
    return st;
}

/* A fresh in-memory file system (sb_io_mem_new), failing the test if it
 * cannot be made. Free with sb_io_destroy. */
static inline sb_io *tu_mem_fs(void)
{
    sb_io *io = NULL;
    assert_int_equal(sb_io_mem_new(&io), 0);
    return io;
}

#endif
