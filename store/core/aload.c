/* aload.c -- asynchronous loads of a match's pages (sb_match_load_start)
 * and fetches from the shared tier (sb_ns_fetch_shared_start):
 * the store's loader threads read a match's pages through the tier in
 * runs, first pages first, so pages [0, k) are resident, and usable,
 * while the pages after them are still read; the caller polls, waits with
 * a timeout for a prefix or the whole, or watches a descriptor.
 *
 * Locks: the loader's mutex guards its queue; st->mu the match's marks
 * (m->loading, m->ready) and what a failed read changes in the match; the
 * load's own mutex its progress and outcome. None is taken inside another.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "match.h"
#include "shared.h"
#include "tier.h"

#define LOADER_THREADS 2
#define RUN_PAGES 64u              /* pages read together, at most... */
#define RUN_BYTES (8ull << 20)     /* ...and at most these bytes */

typedef struct sb_loader {
    pthread_mutex_t mu;
    pthread_cond_t work;
    sb_load *head, *tail;          /* [mu] queued loads, first in first out */
    bool stop;                     /* [mu] */
    void (*hook)(void *ctx, size_t ready); /* [st->mu] sb_load_hook */
    void *hook_ctx;                /* [st->mu] */
    int n_threads;                 /* [const after start] */
    pthread_t threads[LOADER_THREADS];
} sb_loader;

struct sb_load {
    sb_match *m;                   /* [const] (touched only while the load
                                      runs); NULL for a shared-tier fetch */
    sb_ns *ns;                     /* [const] a fetch's namespace (held:
                                      ns->holds) */
    uint32_t *tokens;              /* [const] a fetch's tokens (a copy) */
    size_t n_tokens;               /* [const] */
    sb_store *st;                  /* [const] */
    size_t n_pages;                /* [const] pages asked for */
    bool point;                    /* [const] the point state asked for */
    pthread_mutex_t mu;
    pthread_cond_t moved;          /* [mu] ready grew or the load ended */
    size_t ready;                  /* [mu] pages [0, ready) resident */
    int rc;                        /* [mu] SB_ERR_PENDING until it ends */
    bool cancel;                   /* [mu] asked to stop */
    bool queued;                   /* [loader mu] waiting in the queue */
    int fd;                        /* [mu] eventfd, -1 until asked for */
    sb_load *next;                 /* [loader mu] */
};

/* ---- the load's side ---------------------------------------------------------- */

static void set_ready(sb_load *ld, size_t ready)
{
    sb_match *m = ld->m;
    pthread_mutex_lock(&ld->st->mu);
    m->ready = ready;
    pthread_mutex_unlock(&ld->st->mu);
    pthread_mutex_lock(&ld->mu);
    ld->ready = ready;
    pthread_cond_broadcast(&ld->moved);
    pthread_mutex_unlock(&ld->mu);
}

static void signal_fd(int fd)
{
    uint64_t one = 1;
    while (write(fd, &one, sizeof one) < 0 && errno == EINTR)
        ;
}

/* The load ends with rc, pages [0, ready) resident: the match is its
 * owner's alone again. */
static void end(sb_load *ld, int rc, size_t ready)
{
    pthread_mutex_lock(&ld->st->mu);
    if (ld->m) {
        ld->m->loading = NULL;
        ld->m->ready = 0;
    } else {
        ld->ns->holds--;
        sb_ns_maybe_free(ld->ns);
    }
    pthread_mutex_unlock(&ld->st->mu);
    pthread_mutex_lock(&ld->mu);
    ld->ready = ready;
    ld->rc = rc;
    if (ld->fd >= 0)
        signal_fd(ld->fd);
    pthread_cond_broadcast(&ld->moved);
    pthread_mutex_unlock(&ld->mu);
}

/* Read the load's pages in runs on a loader thread (or fetch from the
 * shared tier). */
static void run(sb_load *ld)
{
    if (!ld->m) {
        size_t added = 0;
        int rc = sb_ns_fetch_shared(ld->ns, ld->tokens, ld->n_tokens, &added);
        end(ld, rc, added);
        return;
    }
    sb_match *m = ld->m;
    const sb_ns *ns = m->ns;
    size_t per = (size_t)(RUN_BYTES / ns->page_bytes);
    per = per < 1 ? 1 : per > RUN_PAGES ? RUN_PAGES : per;
    pthread_mutex_lock(&ld->mu);
    size_t done = ld->ready;
    pthread_mutex_unlock(&ld->mu);
    bool point_left = ld->point;
    int rc = SB_OK;
    while (done < ld->n_pages || point_left) {
        pthread_mutex_lock(&ld->st->mu);
        void (*hook)(void *, size_t) = ld->st->loader->hook;
        void *hook_ctx = ld->st->loader->hook_ctx;
        pthread_mutex_unlock(&ld->st->mu);
        if (hook)
            hook(hook_ctx, done);
        pthread_mutex_lock(&ld->mu);
        bool cancel = ld->cancel;
        pthread_mutex_unlock(&ld->mu);
        if (cancel) {
            rc = SB_ERR_CANCELED;
            break;
        }
        size_t to = ld->n_pages - done < per ? ld->n_pages : done + per;
        bool with_point = point_left && to == ld->n_pages;
        rc = sb_match_fill(m, done, to, with_point, NULL, NULL);
        if (rc == SB_ERR_CORRUPT || rc == SB_ERR_IO) {
            /* The match shrank: what it still holds is resident. */
            pthread_mutex_lock(&ld->st->mu);
            done = m->n_pages < to ? m->n_pages : to;
            pthread_mutex_unlock(&ld->st->mu);
        }
        if (rc != SB_OK)
            break;
        done = to;
        point_left = point_left && !with_point;
        set_ready(ld, done);
    }
    end(ld, rc, done);
}

/* ---- the loader --------------------------------------------------------------- */

static void *loader_main(void *arg)
{
    sb_loader *lo = arg;
    pthread_mutex_lock(&lo->mu);
    for (;;) {
        while (!lo->head && !lo->stop)
            pthread_cond_wait(&lo->work, &lo->mu);
        if (!lo->head)
            break; /* stop, and nothing queued */
        sb_load *ld = lo->head;
        lo->head = ld->next;
        if (!lo->head)
            lo->tail = NULL;
        ld->queued = false;
        pthread_mutex_unlock(&lo->mu);
        run(ld);
        pthread_mutex_lock(&lo->mu);
    }
    pthread_mutex_unlock(&lo->mu);
    return NULL;
}

/* The store's loader, started on first use. [mu] Returns NULL when it
 * cannot be (no memory, no thread). */
static sb_loader *loader(sb_store *st)
{
    if (st->loader)
        return st->loader;
    sb_loader *lo = sb_calloc(&st->mem, 1, sizeof *lo);
    if (!lo)
        return NULL;
    if (pthread_mutex_init(&lo->mu, NULL) != 0) {
        sb_free(lo);
        return NULL;
    }
    if (pthread_cond_init(&lo->work, NULL) != 0) {
        pthread_mutex_destroy(&lo->mu);
        sb_free(lo);
        return NULL;
    }
    for (int i = 0; i < LOADER_THREADS; i++)
        if (pthread_create(&lo->threads[lo->n_threads], NULL, loader_main, lo) == 0)
            lo->n_threads++;
    if (lo->n_threads == 0) {
        pthread_cond_destroy(&lo->work);
        pthread_mutex_destroy(&lo->mu);
        sb_free(lo);
        return NULL;
    }
    st->loader = lo;
    return lo;
}

void sb_load_hook(sb_store *st, void (*fn)(void *ctx, size_t ready), void *ctx)
{
    pthread_mutex_lock(&st->mu);
    sb_loader *lo = loader(st);
    if (lo) {
        lo->hook = fn;
        lo->hook_ctx = ctx;
    }
    pthread_mutex_unlock(&st->mu);
}

void sb_loader_stop(sb_store *st)
{
    sb_loader *lo = st->loader;
    if (!lo)
        return;
    pthread_mutex_lock(&lo->mu);
    lo->stop = true;
    pthread_cond_broadcast(&lo->work);
    pthread_mutex_unlock(&lo->mu);
    for (int i = 0; i < lo->n_threads; i++)
        pthread_join(lo->threads[i], NULL);
    pthread_cond_destroy(&lo->work);
    pthread_mutex_destroy(&lo->mu);
    sb_free(lo);
    st->loader = NULL;
}

/* ---- the calls ---------------------------------------------------------------- */

static sb_load *load_new(sb_store *st, sb_match *m, size_t n_pages, bool point)
{
    sb_load *ld = sb_calloc(&st->mem, 1, sizeof *ld);
    if (!ld)
        return NULL;
    pthread_condattr_t ca;
    bool ok = pthread_condattr_init(&ca) == 0;
    ok = ok && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0;
    if (!ok || pthread_cond_init(&ld->moved, &ca) != 0) {
        sb_free(ld);
        return NULL;
    }
    pthread_condattr_destroy(&ca);
    if (pthread_mutex_init(&ld->mu, NULL) != 0) {
        pthread_cond_destroy(&ld->moved);
        sb_free(ld);
        return NULL;
    }
    ld->m = m;
    ld->st = st;
    ld->n_pages = n_pages;
    ld->point = point;
    ld->rc = SB_ERR_PENDING;
    ld->fd = -1;
    return ld;
}

static void load_free(sb_load *ld)
{
    sb_free(ld->tokens);
    if (ld->fd >= 0)
        close(ld->fd);
    pthread_cond_destroy(&ld->moved);
    pthread_mutex_destroy(&ld->mu);
    sb_free(ld);
}

static void enqueue(sb_loader *lo, sb_load *ld)
{
    pthread_mutex_lock(&lo->mu);
    ld->queued = true;
    if (lo->tail)
        lo->tail->next = ld;
    else
        lo->head = ld;
    lo->tail = ld;
    pthread_cond_signal(&lo->work);
    pthread_mutex_unlock(&lo->mu);
}

int sb_match_load_start(sb_match *m, size_t n_pages, int point, sb_load **out)
{
    if (out)
        *out = NULL;
    if (!m || !out)
        return SB_ERR_INVAL;
    sb_store *st = m->st;
    sb_load *ld = load_new(st, m, n_pages, point != 0);
    if (!ld)
        return SB_ERR_NOMEM;
    int rc = SB_OK;
    pthread_mutex_lock(&st->mu);
    size_t k = 0;
    if (m->loading)
        rc = SB_ERR_BUSY;
    else if (n_pages > m->n_pages)
        rc = SB_ERR_RANGE;
    else if (point && (n_pages != m->n_pages || !m->point))
        rc = SB_ERR_NO_POINT;
    else
        while (k < n_pages && m->pages[k]->data)
            k++;
    bool done = rc == SB_OK && k == n_pages && (!point || m->point->data);
    sb_loader *lo = rc == SB_OK && !done ? loader(st) : NULL;
    if (rc == SB_OK && !done && !lo)
        rc = SB_ERR_NOMEM;
    if (rc == SB_OK && !done) {
        m->loading = ld;
        m->ready = k;
    }
    pthread_mutex_unlock(&st->mu);
    if (rc != SB_OK) {
        load_free(ld);
        return rc;
    }
    ld->ready = k;
    if (done)
        ld->rc = SB_OK;
    else
        enqueue(lo, ld);
    *out = ld;
    return SB_OK;
}

int sb_ns_fetch_shared_start(sb_ns *ns, const uint32_t *tokens, size_t n_tokens, sb_load **out)
{
    if (out)
        *out = NULL;
    int rc = out ? sb_fetch_check(ns, tokens, n_tokens) : SB_ERR_INVAL;
    if (rc != SB_OK)
        return rc;
    sb_store *st = ns->st;
    sb_load *ld = load_new(st, NULL, 0, false);
    uint32_t *copy = ld ? sb_malloc(&st->mem, n_tokens * sizeof *copy) : NULL;
    if (!copy) {
        if (ld)
            load_free(ld);
        return SB_ERR_NOMEM;
    }
    memcpy(copy, tokens, n_tokens * sizeof *copy);
    ld->ns = ns;
    ld->tokens = copy;
    ld->n_tokens = n_tokens;
    pthread_mutex_lock(&st->mu);
    sb_loader *lo = loader(st);
    if (lo)
        ns->holds++;
    pthread_mutex_unlock(&st->mu);
    if (!lo) {
        load_free(ld);
        return SB_ERR_NOMEM;
    }
    enqueue(lo, ld);
    *out = ld;
    return SB_OK;
}

int sb_load_poll(sb_load *ld, size_t *n_ready)
{
    return sb_load_wait(ld, SIZE_MAX, 0, n_ready);
}

/* ts + ms, on CLOCK_MONOTONIC. */
static struct timespec deadline(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

int sb_load_wait(sb_load *ld, size_t n_pages, int64_t timeout_ms, size_t *n_ready)
{
    if (!ld)
        return SB_ERR_INVAL;
    struct timespec until = deadline(timeout_ms > 0 ? timeout_ms : 0);
    bool whole = n_pages >= ld->n_pages;
    pthread_mutex_lock(&ld->mu);
    int rc;
    for (;;) {
        if (ld->rc != SB_ERR_PENDING) {
            /* Ended: a prefix it made resident is there whatever the end. */
            rc = !whole && ld->ready >= n_pages ? SB_OK : ld->rc;
            break;
        }
        if (!whole && ld->ready >= n_pages) {
            rc = SB_OK;
            break;
        }
        if (timeout_ms == 0) {
            rc = SB_ERR_PENDING;
            break;
        }
        if (timeout_ms < 0) {
            pthread_cond_wait(&ld->moved, &ld->mu);
        } else if (pthread_cond_timedwait(&ld->moved, &ld->mu, &until) == ETIMEDOUT) {
            timeout_ms = 0; /* one last look */
        }
    }
    if (n_ready)
        *n_ready = ld->ready;
    pthread_mutex_unlock(&ld->mu);
    return rc;
}

int sb_load_fd(sb_load *ld)
{
    if (!ld)
        return SB_ERR_INVAL;
    pthread_mutex_lock(&ld->mu);
    if (ld->fd < 0) {
        ld->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (ld->fd >= 0 && ld->rc != SB_ERR_PENDING)
            signal_fd(ld->fd);
    }
    int fd = ld->fd >= 0 ? ld->fd : SB_ERR_NOMEM;
    pthread_mutex_unlock(&ld->mu);
    return fd;
}

void sb_load_cancel(sb_load *ld)
{
    if (!ld)
        return;
    pthread_mutex_lock(&ld->mu);
    bool ended = ld->rc != SB_ERR_PENDING;
    ld->cancel = true;
    pthread_mutex_unlock(&ld->mu);
    if (ended)
        return;
    /* A load still queued ends here, without a loader thread. */
    sb_loader *lo = ld->st->loader;
    pthread_mutex_lock(&lo->mu);
    bool dequeued = ld->queued;
    if (dequeued) {
        sb_load **p = &lo->head, *prev = NULL;
        while (*p != ld) {
            prev = *p;
            p = &(*p)->next;
        }
        *p = ld->next;
        if (lo->tail == ld)
            lo->tail = prev;
        ld->queued = false;
    }
    pthread_mutex_unlock(&lo->mu);
    if (dequeued) {
        pthread_mutex_lock(&ld->mu);
        size_t ready = ld->ready;
        pthread_mutex_unlock(&ld->mu);
        end(ld, SB_ERR_CANCELED, ready);
    }
}

/* Cancel ld and wait until it ended. */
static void stop(sb_load *ld)
{
    sb_load_cancel(ld);
    pthread_mutex_lock(&ld->mu);
    while (ld->rc == SB_ERR_PENDING)
        pthread_cond_wait(&ld->moved, &ld->mu);
    pthread_mutex_unlock(&ld->mu);
}

void sb_match_detach(sb_match *m)
{
    pthread_mutex_lock(&m->st->mu);
    sb_load *ld = m->loading;
    pthread_mutex_unlock(&m->st->mu);
    if (ld)
        stop(ld);
}

void sb_load_free(sb_load *ld)
{
    if (!ld)
        return;
    stop(ld);
    load_free(ld);
}
