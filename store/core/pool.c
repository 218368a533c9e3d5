/* pool.c -- the page pool: chunks of pre-faulted slots, spares by size,
 * trimming (see pool.h for the layout and the budget rules). */
#define _GNU_SOURCE /* MAP_ANONYMOUS, madvise advice */
#include "pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "snapbank.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define HUGE_BYTES (2u << 20)  /* x86-64 transparent huge page */

/* n rounded up to whole huge pages. */
static size_t huge_up(size_t n)
{
    return (n + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES;
}

/* ASan does not see into our mappings by itself: a spare is poisoned, so a
 * block's data used after it went back to the pool is reported. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

void sb_pool_init(sb_pool *p)
{
    memset(p, 0, sizeof *p);
}

/* Does class c give a trimmed slot's pages back at once? Only when slots
 * are whole pages; smaller slots share pages and wait for their chunk. */
static bool trims_slots(const sb_pool_cls *c)
{
    return c->stride % 4096 == 0;
}

/* Unmap chunk k and free it. trimmed: its slots were unmapped one by one
 * already (their ranges may hold other mappings by now): only the tail
 * past them is left. */
static void chunk_unmap(sb_chunk *k, bool trimmed)
{
    size_t from = trimmed ? (size_t)k->n_slots * k->cls->stride : 0;
    UNPOISON(k->base + from, k->map_bytes - from);
    if (k->map_bytes > from)
        munmap(k->base + from, k->map_bytes - from);
    free(k);
}

void sb_pool_fini(sb_pool *p)
{
    /* Every block is freed: every live slot is a spare. A chunk never
     * trimmed goes whole; one trimmed (its holes may hold other mappings
     * by now) slot by slot. */
    for (sb_pool_cls *c = p->classes; c; c = c->next)
        for (size_t i = 0; i < c->n_spare; i++)
            if (c->spare[i].chunk->trimmed && trims_slots(c)) {
                UNPOISON(c->spare[i].data, c->stride);
                munmap(c->spare[i].data, c->stride);
            }
    while (p->chunks) {
        sb_chunk *k = p->chunks;
        p->chunks = k->next;
        chunk_unmap(k, k->trimmed && trims_slots(k->cls));
    }
    while (p->classes) {
        sb_pool_cls *c = p->classes;
        p->classes = c->next;
        free(c->spare);
        free(c);
    }
    memset(p, 0, sizeof *p);
}

sb_pool_cls *sb_pool_class(sb_pool *p, sb_mem *mem, size_t data_bytes, size_t align,
                           size_t budget_bytes, bool page)
{
    for (sb_pool_cls *c = p->classes; c; c = c->next)
        if (c->data_bytes == data_bytes && c->align == align &&
            c->budget_bytes == budget_bytes && c->page == page)
            return c;
    sb_pool_cls *c = sb_calloc(mem, 1, sizeof *c);
    if (!c)
        return NULL;
    c->data_bytes = data_bytes;
    c->budget_bytes = budget_bytes;
    c->align = align;
    c->stride = (data_bytes + align - 1) / align * align;
    if (c->stride == 0)
        c->stride = align;
    c->page = page;
    c->next = p->classes;
    p->classes = c;
    return c;
}

bool sb_pool_take(sb_pool *p, sb_pool_cls *c, sb_pbuf *out)
{
    if (!c->n_spare)
        return false;
    *out = c->spare[--c->n_spare];
    p->spare_bytes -= c->budget_bytes;
    p->spare_pages -= c->page;
    UNPOISON(out->data, c->data_bytes);
    return true;
}

void sb_pool_put(sb_pool *p, sb_pool_cls *c, sb_pbuf buf)
{
    POISON(buf.data, c->stride);
    c->spare[c->n_spare++] = buf; /* room: spare_cap >= n_slots */
    p->spare_bytes += c->budget_bytes;
    p->spare_pages += c->page;
}

size_t sb_pool_plan(const sb_pool_cls *c, size_t need)
{
    size_t max = SB_POOL_CHUNK_MAX / c->stride;
    size_t want = c->n_slots < max ? c->n_slots : max;
    if (want < need)
        want = need;
    if (!want)
        want = 1;
    /* Slots to the end of the last huge page, when there is room for more
     * (they become spares if the budget has room). */
    size_t bytes = want * c->stride;
    if (bytes >= HUGE_BYTES && want < max) {
        size_t fill = huge_up(bytes) / c->stride;
        want = fill < max ? fill : max;
    }
    return want;
}

void sb_pool_transit(sb_pool *p, sb_pool_cls *c, size_t n, int sign)
{
    if (sign > 0) {
        c->n_transit += n;
        p->transit_bytes += n * c->budget_bytes;
        p->transit_pages += c->page ? n : 0;
    } else {
        c->n_transit -= n;
        p->transit_bytes -= n * c->budget_bytes;
        p->transit_pages -= c->page ? n : 0;
    }
}

/* The bytes to map for a chunk of len bytes of slots: a chunk of at least
 * one huge page ends on a huge page's end when that costs at most an
 * eighth of it (a tail shorter than a huge page would get 4 KiB pages:
 * each of those costs the pinning of an O_DIRECT read, and on a VM the
 * first touch after the device wrote it, far more than a huge page's).
 * Otherwise len rounded up to 4 KiB. */
static size_t map_len(size_t len)
{
    size_t up = huge_up(len);
    if (len >= HUGE_BYTES && up - len <= len / 8)
        return up;
    return (len + 4095) / 4096 * 4096;
}

/* Map len bytes for slots: 2 MiB aligned and advised for huge pages when at
 * least that long, then populated (written by the kernel, zero-filled) so
 * that nothing faults later. NULL when the system refuses. */
static uint8_t *map_populated(size_t len)
{
    bool huge = len >= HUGE_BYTES;
    size_t span = huge ? len + HUGE_BYTES : len;
    uint8_t *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    uint8_t *base = m;
    if (huge) { /* keep the aligned part */
        base = (uint8_t *)(((uintptr_t)m + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
        if (base > m)
            munmap(m, (size_t)(base - m));
        if (m + span > base + len)
            munmap(base + len, (size_t)(m + span - (base + len)));
        (void)madvise(base, len, MADV_HUGEPAGE); /* advice: refused where THP is off */
    }
    if (madvise(base, len, MADV_POPULATE_WRITE) != 0) {
        if (errno != EINVAL) { /* ENOMEM, EFAULT: the memory is not there */
            munmap(base, len);
            return NULL;
        }
        long pg = sysconf(_SC_PAGESIZE); /* kernels before 5.14: touch it */
        for (size_t i = 0; i < len; i += (size_t)(pg > 0 ? pg : 4096))
            ((volatile uint8_t *)base)[i] = 0;
    }
    return base;
}

void *sb_pool_map(size_t len, size_t *mapped)
{
    size_t up = huge_up(len ? len : 1);
    uint8_t *p = map_populated(up);
    *mapped = p ? up : 0;
    return p;
}

int sb_pool_grow(sb_mem *mem, sb_pool_cls *c, size_t n, sb_pbuf *out)
{
    /* As few chunks as SB_POOL_CHUNK_MAX allows, of equal size: 512 slots
     * of 192 KiB are 4 chunks of 128 (24 MiB, 12 whole huge pages each),
     * not 170 + 170 + 170 + 2 (three tails of 4 KiB pages and a chunk too
     * short for a huge page). */
    size_t per = SB_POOL_CHUNK_MAX / c->stride, done = 0;
    if (per < 1)
        per = 1;
    size_t chunks = (n + per - 1) / per;
    per = chunks ? (n + chunks - 1) / chunks : 1;
    while (done < n) {
        size_t k = n - done < per ? n - done : per;
        size_t len = map_len(k * c->stride);
        sb_chunk *ch = sb_calloc(mem, 1, sizeof *ch);
        uint8_t *base = ch ? map_populated(len) : NULL;
        if (!base) {
            free(ch);
            sb_pool_unmap(out, done);
            return SB_ERR_NOMEM;
        }
        *ch = (sb_chunk){ .base = base, .map_bytes = len, .cls = c, .n_slots = (uint32_t)k,
                          .n_live = (uint32_t)k };
        for (size_t i = 0; i < k; i++)
            out[done + i] = (sb_pbuf){ base + i * c->stride, ch };
        done += k;
    }
    return SB_OK;
}

void sb_pool_unmap(const sb_pbuf *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (i == 0 || out[i].chunk != out[i - 1].chunk)
            chunk_unmap(out[i].chunk, false);
}

int sb_pool_link(sb_pool *p, sb_pool_cls *c, const sb_pbuf *out, size_t n)
{
    size_t slots = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || out[i].chunk != out[i - 1].chunk)
            slots += out[i].chunk->n_slots;
    if (c->spare_cap < c->n_slots + slots) {
        size_t cap = (c->n_slots + slots) * 2;
        sb_pbuf *s = realloc(c->spare, cap * sizeof *s);
        if (!s)
            return SB_ERR_NOMEM;
        c->spare = s;
        c->spare_cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        if (i && out[i].chunk == out[i - 1].chunk)
            continue;
        sb_chunk *k = out[i].chunk;
        k->next = p->chunks;
        k->prev = NULL;
        if (p->chunks)
            p->chunks->prev = k;
        p->chunks = k;
        p->n_chunks++;
        p->resident_bytes += (uint64_t)k->n_slots * c->stride;
        p->grown_bytes += (uint64_t)k->n_slots * c->stride;
    }
    c->n_slots += slots;
    return SB_OK;
}

void sb_pool_discard(sb_pool *p, sb_pbuf buf)
{
    sb_chunk *k = buf.chunk;
    sb_pool_cls *c = k->cls;
    /* The slot's pages go now when it is whole pages, else with its chunk.
     * (The range may be mapped again by anyone: nothing here touches it
     * again, chunk_unmap included.) */
    UNPOISON(buf.data, c->stride);
    if (trims_slots(c))
        munmap(buf.data, c->stride);
    k->trimmed = true;
    p->resident_bytes -= c->stride;
    c->n_slots--;
    if (--k->n_live)
        return;
    if (k->prev)
        k->prev->next = k->next;
    else
        p->chunks = k->next;
    if (k->next)
        k->next->prev = k->prev;
    p->n_chunks--;
    chunk_unmap(k, trims_slots(c));
}

void sb_pool_trim(sb_pool *p, uint64_t bytes, uint64_t pages, uint64_t *freed_bytes,
                  uint64_t *freed_pages)
{
    uint64_t fb = 0, fp = 0;
    for (sb_pool_cls *c = p->classes; c && (fb < bytes || fp < pages); c = c->next) {
        while (c->n_spare && (fb < bytes || (c->page && fp < pages))) {
            sb_pbuf b = c->spare[--c->n_spare];
            p->spare_bytes -= c->budget_bytes;
            p->spare_pages -= c->page;
            p->trimmed_bytes += c->budget_bytes;
            fb += c->budget_bytes;
            fp += c->page;
            sb_pool_discard(p, b);
        }
    }
    *freed_bytes += fb;
    *freed_pages += fp;
}
