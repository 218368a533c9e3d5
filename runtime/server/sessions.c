/* sessions.c -- sessions kept between requests, in RAM and in files
 * (sessions.h). */
#define _POSIX_C_SOURCE 200809L
#include "server/sessions.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "model/model.h"
#include "session/sfile.h"

#define PROMPT_END SB_RT_SFILE_PROMPT_END

/* A mark (sessions.h): tokens (bit 63: a prompt's end) and text bytes. */
typedef sb_rt_sfile_mark mark;

struct srv_session {
    char tenant[SRV_TENANT_MAX + 2]; /* its files' directory name */
    char id[SRV_SESSION_ID_MAX + 1];
    uint32_t *tokens;
    size_t n_tokens;
    char *text;
    size_t text_len;
    mark *marks;
    size_t n_marks;
    uint64_t turns, created, updated;
    sb_rt_sfile_turn last; /* the last turn, as in the file */
    bool busy;          /* a request holds it */
    bool dirty;         /* changed since serialized for its file */
    unsigned saving;    /* serialized and not yet written */
    uint64_t version;   /* changes so far */
    uint64_t saved;     /* the version its file holds */
    uint64_t epoch;     /* this incarnation (a deleted id comes back new) */
    uint64_t used;      /* LRU clock */
};

struct srv_sessions {
    pthread_mutex_t mu;    /* the table and every session's fields */
    pthread_cond_t cv;     /* a session became dirty, or quit */
    pthread_mutex_t io_mu; /* file writes and removals, one at a time */
    srv_session **s;
    size_t n, cap;
    size_t max_in_ram;
    char *dir;             /* NULL: RAM only */
    uint8_t model_id[SB_RT_ID_BYTES];
    uint64_t clock, epochs;
    pthread_t th;
    bool th_started, quit;
};

bool srv_session_id_valid(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (n < 1 || n > SRV_SESSION_ID_MAX || id[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

static const char *tenant_dir(const srv_tenant *t)
{
    return t->scope[0] ? t->name : "@default";
}

static void session_free(srv_session *s)
{
    if (!s)
        return;
    free(s->tokens);
    free(s->text);
    free(s->marks);
    free(s);
}

/* ---- the file (its format: session/sfile.h) ---------------------------------------- */

/* The file's bytes for s (malloc'd) into *out, *len. */
static int serialize(const srv_sessions *r, const srv_session *s, uint8_t **out, size_t *len)
{
    sb_rt_sfile f = { .tokens = s->tokens, .n_tokens = s->n_tokens, .conv = true,
                      .marks = s->marks, .n_marks = s->n_marks, .text = s->text,
                      .text_bytes = s->text_len, .turns = s->turns, .created = s->created,
                      .updated = s->updated, .last = s->last };
    memcpy(f.model_id, r->model_id, SB_RT_ID_BYTES);
    return sb_rt_sfile_encode(&f, out, len);
}

/* Read s's fields from the file at path. Returns SB_OK, SB_ERR_NOT_FOUND,
 * or another error (printed; s is left empty). A file without the
 * conversation section (a runtime session's, sb_rt_session_save) gives
 * the tokens alone. */
static int load(const srv_sessions *r, srv_session *s, const char *path)
{
    sb_rt_sfile f;
    sb_rt_err err = { 0 };
    int rc = sb_rt_sfile_read(path, r->model_id, &f, &err);
    if (rc == SB_ERR_NOT_FOUND)
        return rc;
    if (rc != SB_OK) {
        fprintf(stderr, "snapbank serve: session file %s; the session starts empty\n", err.msg);
        return rc;
    }
    s->tokens = f.tokens, s->n_tokens = f.n_tokens;
    s->marks = f.marks, s->n_marks = f.n_marks;
    s->text = f.text, s->text_len = f.text_bytes;
    s->turns = f.turns, s->last = f.last;
    if (f.conv) {
        s->created = f.created, s->updated = f.updated;
    } else {
        struct stat st;
        s->created = s->updated = stat(path, &st) == 0 ? (uint64_t)st.st_mtime
                                                       : (uint64_t)time(NULL);
    }
    return SB_OK;
}

static int session_path(const srv_sessions *r, const char *tenant, const char *id, char *buf,
                        size_t cap)
{
    int n = snprintf(buf, cap, "%s/%s/%s.sbs", r->dir, tenant, id);
    return n > 0 && (size_t)n < cap ? SB_OK : SB_ERR_INVAL;
}

static int write_file(const char *path, const uint8_t *b, size_t len, const char *tenant_path)
{
    if (mkdir(tenant_path, 0700) != 0 && errno != EEXIST)
        return SB_ERR_IO;
    return sb_rt_sfile_write(path, b, len, NULL);
}

static srv_session *find(srv_sessions *r, const char *tenant, const char *id, size_t *at)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->s[i]->id, id) && !strcmp(r->s[i]->tenant, tenant)) {
            if (at)
                *at = i;
            return r->s[i];
        }
    return NULL;
}

/* Write one dirty session (found under r->mu, which is held on entry and
 * on return). Returns: 1 written, 0 none dirty, -1 failed. */
static int save_one(srv_sessions *r)
{
    srv_session *s = NULL;
    for (size_t i = 0; i < r->n && !s; i++)
        if (r->s[i]->dirty)
            s = r->s[i];
    if (!s)
        return 0;
    uint8_t *b = NULL;
    size_t len = 0;
    char tenant[sizeof s->tenant], id[sizeof s->id];
    memcpy(tenant, s->tenant, sizeof tenant);
    memcpy(id, s->id, sizeof id);
    uint64_t epoch = s->epoch, version = s->version;
    if (serialize(r, s, &b, &len) != SB_OK)
        return -1; /* stays dirty: tried again later */
    s->dirty = false;
    s->saving++;
    pthread_mutex_unlock(&r->mu);

    pthread_mutex_lock(&r->io_mu);
    char path[4096], tdir[4096];
    int rc = session_path(r, tenant, id, path, sizeof path);
    if (rc == SB_OK && snprintf(tdir, sizeof tdir, "%s/%s", r->dir, tenant) >= (int)sizeof tdir)
        rc = SB_ERR_INVAL;
    /* still the same session, and no newer write of it done? */
    pthread_mutex_lock(&r->mu);
    srv_session *now = find(r, tenant, id, NULL);
    bool current = now && now->epoch == epoch && version > now->saved;
    pthread_mutex_unlock(&r->mu);
    if (rc == SB_OK && current)
        rc = write_file(path, b, len, tdir);
    pthread_mutex_unlock(&r->io_mu);
    free(b);

    pthread_mutex_lock(&r->mu);
    now = find(r, tenant, id, NULL);
    if (now && now->epoch == epoch) {
        now->saving--;
        if (rc == SB_OK && current && version > now->saved)
            now->saved = version;
        if (rc != SB_OK)
            now->dirty = true;
    }
    if (rc != SB_OK)
        fprintf(stderr, "snapbank serve: session %s/%s: cannot write its file: %s\n", tenant,
                id, sb_strerror(rc));
    return rc == SB_OK ? 1 : -1;
}

static void *writer_main(void *arg)
{
    srv_sessions *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        int w = save_one(r);
        if (w > 0)
            continue;
        if (r->quit)
            break;
        if (w < 0) { /* a failing file: try again in a second, not in a loop */
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            t.tv_sec += 1;
            pthread_cond_timedwait(&r->cv, &r->mu, &t);
        } else {
            pthread_cond_wait(&r->cv, &r->mu);
        }
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* ---- the registry ------------------------------------------------------------------ */

int srv_sessions_new(const char *dir, const uint8_t *model_id, size_t max_in_ram,
                     srv_sessions **out, sb_rt_err *err)
{
    *out = NULL;
    srv_sessions *r = calloc(1, sizeof *r);
    if (!r)
        return sb_rt_fail(err, SB_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->io_mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    memcpy(r->model_id, model_id, SB_RT_ID_BYTES);
    r->max_in_ram = max_in_ram ? max_in_ram : 1;
    if (dir) {
        if (!(r->dir = strdup(dir))) {
            srv_sessions_free(r);
            return sb_rt_fail(err, SB_ERR_NOMEM, "out of memory");
        }
        struct stat st;
        if ((mkdir(dir, 0700) != 0 && errno != EEXIST) || stat(dir, &st) != 0 ||
            !S_ISDIR(st.st_mode)) {
            int e = errno;
            srv_sessions_free(r);
            return sb_rt_fail(err, SB_ERR_IO, "%s: cannot make the sessions directory: %s", dir,
                              strerror(e));
        }
        if (pthread_create(&r->th, NULL, writer_main, r) != 0) {
            srv_sessions_free(r);
            return sb_rt_fail(err, SB_ERR_NOMEM, "cannot start the session writer");
        }
        r->th_started = true;
    }
    *out = r;
    return SB_OK;
}

size_t srv_sessions_flush(srv_sessions *r, size_t *failed)
{
    size_t n = 0, bad = 0;
    if (r->dir) {
        pthread_mutex_lock(&r->mu);
        size_t rounds = r->n + 1; /* each session once at most: no livelock */
        for (int w; rounds-- && (w = save_one(r)) != 0;)
            w > 0 ? n++ : bad++;
        pthread_mutex_unlock(&r->mu);
    }
    if (failed)
        *failed = bad;
    return n;
}

void srv_sessions_free(srv_sessions *r)
{
    if (!r)
        return;
    if (r->th_started) {
        pthread_mutex_lock(&r->mu);
        r->quit = true;
        pthread_cond_signal(&r->cv);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->th, NULL);
    }
    for (size_t i = 0; i < r->n; i++)
        session_free(r->s[i]);
    free(r->s);
    free(r->dir);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->io_mu);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* Drop the least recently used sessions that are neither held nor waiting
 * for their file, while RAM holds more than its limit (under r->mu). */
static void trim(srv_sessions *r)
{
    while (r->n > r->max_in_ram) {
        size_t victim = SIZE_MAX;
        for (size_t i = 0; i < r->n; i++) {
            srv_session *s = r->s[i];
            if (!s->busy && !s->dirty && !s->saving &&
                (victim == SIZE_MAX || s->used < r->s[victim]->used))
                victim = i;
        }
        if (victim == SIZE_MAX)
            return;
        session_free(r->s[victim]);
        r->s[victim] = r->s[--r->n];
    }
}

/* The session (tenant, id) in RAM, read from its file when it has one, or
 * made empty when create (under r->mu). NULL: not found, or no memory. */
static srv_session *lookup(srv_sessions *r, const srv_tenant *t, const char *id, bool create,
                           int *rc)
{
    const char *td = tenant_dir(t);
    srv_session *s = find(r, td, id, NULL);
    *rc = SB_OK;
    if (s)
        return s;
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        srv_session **ns = realloc(r->s, cap * sizeof *ns);
        if (!ns)
            return *rc = SB_ERR_NOMEM, NULL;
        r->s = ns, r->cap = cap;
    }
    s = calloc(1, sizeof *s);
    if (!s)
        return *rc = SB_ERR_NOMEM, NULL;
    snprintf(s->tenant, sizeof s->tenant, "%s", td);
    snprintf(s->id, sizeof s->id, "%s", id);
    int lrc = SB_ERR_NOT_FOUND;
    char path[4096];
    if (r->dir && session_path(r, td, id, path, sizeof path) == SB_OK)
        lrc = load(r, s, path);
    if (lrc == SB_ERR_NOT_FOUND && !create) {
        session_free(s);
        return *rc = SB_ERR_NOT_FOUND, NULL;
    }
    if (lrc == SB_OK)
        s->saved = s->version = 1; /* what the file holds */
    else
        s->created = s->updated = (uint64_t)time(NULL);
    s->epoch = ++r->epochs;
    r->s[r->n++] = s;
    return s;
}

int srv_sessions_acquire(srv_sessions *r, const srv_tenant *t, const char *id,
                         srv_session **out)
{
    *out = NULL;
    pthread_mutex_lock(&r->mu);
    int rc;
    srv_session *s = lookup(r, t, id, true, &rc);
    if (s && s->busy)
        rc = SB_ERR_LOCKED;
    else if (s) {
        s->busy = true;
        s->used = ++r->clock;
        *out = s;
        trim(r);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

size_t srv_session_prefix(const srv_session *s, const char *text, size_t len,
                          const uint32_t **tokens, size_t *n_tokens)
{
    size_t common = 0, lim = len < s->text_len ? len : s->text_len;
    while (common < lim && text[common] == s->text[common])
        common++;
    *n_tokens = 0;
    if (tokens)
        *tokens = s->tokens;
    for (size_t i = s->n_marks; i-- > 0;)
        if (s->marks[i].text_bytes <= common) {
            *n_tokens = (size_t)(s->marks[i].n_tokens & ~PROMPT_END);
            return (size_t)s->marks[i].text_bytes;
        }
    return 0;
}

/* Append to a growing mark array. */
static int add_mark(mark **m, size_t *n, size_t *cap, uint64_t tokens, uint64_t text_len)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        mark *nm = realloc(*m, c * sizeof *nm);
        if (!nm)
            return SB_ERR_NOMEM;
        *m = nm, *cap = c;
    }
    (*m)[(*n)++] = (mark){ tokens, text_len };
    return SB_OK;
}

/* The session's new state after turn, built aside (so a failure leaves the
 * old one). */
static int apply(srv_session *s, const srv_session_turn *t)
{
    uint32_t *tok = malloc((t->n_tokens ? t->n_tokens : 1) * sizeof *tok);
    mark *m = NULL;
    size_t n_m = 0, cap_m = 0;
    char *text = NULL;
    size_t text_len = 0;
    int rc = tok ? SB_OK : SB_ERR_NOMEM;
    if (rc == SB_OK && t->prompt_text) {
        /* the prompt ends of earlier turns that the prompt kept, the point
         * it continued from, its own end, the marks in the answer */
        for (size_t i = 0; i < s->n_marks && rc == SB_OK; i++) {
            uint64_t n = s->marks[i].n_tokens & ~PROMPT_END;
            if ((s->marks[i].n_tokens & PROMPT_END) && n < t->kept_tokens &&
                s->marks[i].text_bytes < t->kept_text)
                rc = add_mark(&m, &n_m, &cap_m, s->marks[i].n_tokens, s->marks[i].text_bytes);
        }
        if (rc == SB_OK && t->kept_tokens && t->kept_tokens < t->n_prompt)
            rc = add_mark(&m, &n_m, &cap_m, t->kept_tokens, t->kept_text);
        if (rc == SB_OK && t->n_tokens >= t->n_prompt)
            rc = add_mark(&m, &n_m, &cap_m, t->n_prompt | PROMPT_END, t->prompt_len);
        size_t answer = 0; /* answer text bytes the tokens cover */
        for (size_t i = 0; i < t->n_marks && rc == SB_OK; i++)
            if (t->n_prompt + t->marks[i].n <= t->n_tokens) {
                rc = add_mark(&m, &n_m, &cap_m, t->n_prompt + t->marks[i].n,
                              t->prompt_len + t->marks[i].text_len);
                answer = t->marks[i].text_len;
            }
        text_len = t->prompt_len + answer;
        if (rc == SB_OK && !(text = malloc(text_len + 1)))
            rc = SB_ERR_NOMEM;
        if (rc == SB_OK) {
            memcpy(text, t->prompt_text, t->prompt_len);
            if (answer)
                memcpy(text + t->prompt_len, t->answer_text, answer);
            text[text_len] = 0;
        }
    }
    if (rc != SB_OK) {
        free(tok), free(m), free(text);
        return rc;
    }
    if (t->n_tokens)
        memcpy(tok, t->tokens, t->n_tokens * sizeof *tok);
    free(s->tokens), free(s->marks), free(s->text);
    s->tokens = tok, s->n_tokens = t->n_tokens;
    s->marks = m, s->n_marks = n_m;
    s->text = text, s->text_len = text_len;
    s->turns++;
    s->updated = (uint64_t)time(NULL);
    s->last = (sb_rt_sfile_turn){ t->n_prompt, t->cached_tokens, t->cached_disk_tokens,
                                  t->completion_tokens, (uint64_t)t->cache_mode,
                                  (uint64_t)(t->restore_s * 1e6) };
    return SB_OK;
}

void srv_sessions_release(srv_sessions *r, srv_session *s, const srv_session_turn *turn)
{
    pthread_mutex_lock(&r->mu);
    if (turn && apply(s, turn) == SB_OK) {
        s->version++;
        s->dirty = r->dir != NULL;
        pthread_cond_signal(&r->cv);
    }
    s->busy = false;
    s->used = ++r->clock;
    if (!s->turns && !s->version) { /* made for a request that never ran: gone again */
        size_t at;
        if (find(r, s->tenant, s->id, &at) == s) {
            r->s[at] = r->s[--r->n];
            session_free(s);
        }
    }
    trim(r);
    pthread_mutex_unlock(&r->mu);
}

static const char *mode_name(uint64_t m)
{
    return m == 1 ? "warm_prefix" : m == 2 ? "ssd" : m == 3 ? "remote" : "cold";
}

int srv_sessions_get(srv_sessions *r, const srv_tenant *t, const char *id, json_t **out,
                     uint32_t **tokens, size_t *n_tokens)
{
    *out = NULL, *tokens = NULL, *n_tokens = 0;
    pthread_mutex_lock(&r->mu);
    int rc;
    srv_session *s = lookup(r, t, id, false, &rc);
    if (s) {
        s->used = ++r->clock;
        json_t *last = s->turns ? json_pack("{s:I, s:I, s:I, s:I, s:I, s:s, s:f}",
            "prompt_tokens", (json_int_t)s->last.prompt_tokens,
            "cached_tokens", (json_int_t)s->last.cached_tokens,
            "cached_tokens_ram", (json_int_t)(s->last.cached_tokens - s->last.cached_disk_tokens),
            "cached_tokens_disk", (json_int_t)s->last.cached_disk_tokens,
            "completion_tokens", (json_int_t)s->last.completion_tokens,
            "cache_mode", mode_name(s->last.cache_mode),
            "restore_ms", (double)s->last.restore_us / 1e3) : json_null();
        uint64_t reusable = s->n_marks ? s->marks[s->n_marks - 1].n_tokens & ~PROMPT_END : 0;
        *out = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:b}", "id", s->id,
                         "object", "session", "created", (json_int_t)s->created, "updated",
                         (json_int_t)s->updated, "turns", (json_int_t)s->turns, "tokens",
                         (json_int_t)s->n_tokens, "reusable_tokens", (json_int_t)reusable,
                         "text_bytes", (json_int_t)s->text_len, "last_turn", last, "busy",
                         s->busy);
        if (s->n_tokens && (*tokens = malloc(s->n_tokens * sizeof **tokens))) {
            memcpy(*tokens, s->tokens, s->n_tokens * sizeof **tokens);
            *n_tokens = s->n_tokens;
        }
        rc = *out && (!s->n_tokens || *tokens) ? SB_OK : SB_ERR_NOMEM;
        if (rc != SB_OK) {
            json_decref(*out);
            free(*tokens);
            *out = NULL, *tokens = NULL, *n_tokens = 0;
        }
        trim(r);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int srv_sessions_delete(srv_sessions *r, const srv_tenant *t, const char *id)
{
    pthread_mutex_lock(&r->io_mu);
    pthread_mutex_lock(&r->mu);
    const char *td = tenant_dir(t);
    size_t at;
    srv_session *s = find(r, td, id, &at);
    int rc = SB_OK;
    char path[4096];
    bool on_disk = r->dir && session_path(r, td, id, path, sizeof path) == SB_OK &&
                   access(path, F_OK) == 0;
    if (s && s->busy)
        rc = SB_ERR_LOCKED;
    else if (!s && !on_disk)
        rc = SB_ERR_NOT_FOUND;
    else if (s) {
        session_free(s);
        r->s[at] = r->s[--r->n];
    }
    pthread_mutex_unlock(&r->mu);
    if (rc == SB_OK && on_disk)
        unlink(path);
    pthread_mutex_unlock(&r->io_mu);
    return rc;
}

size_t srv_sessions_count(srv_sessions *r)
{
    pthread_mutex_lock(&r->mu);
    size_t n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}
