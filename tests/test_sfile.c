/* test_sfile.c -- the one session file format (runtime/session/sfile.h)
 * and its two users: the runtime's sessions (sb_rt_session_save / _load)
 * and snapbank serve's session registry (server/sessions.h).
 *
 * Description:
 *   - the layout: the example drawn in sfile.h is the encoder's output,
 *     byte for byte, and decodes back;
 *   - across users: a file a runtime session saved loads in the server's
 *     registry (its tokens; no marks, no text), and a file the registry
 *     wrote loads with sb_rt_session_load (the tokens) and in a fresh
 *     registry (tokens, text, turns, last turn);
 *   - legacy files, written here byte by byte as the old writers did:
 *     "SBSESSN\0" version 1 (sb_rt_session_save's) and "SBSRVSES"
 *     version 1 (the server's) load as before; the registry rewrites its
 *     session as version 2 after the next turn;
 *   - refusals: every flipped byte of a version 2 file with the section is
 *     SB_ERR_FORMAT (SB_ERR_VERSION when the byte is the version's), every
 *     truncation SB_ERR_FORMAT, another model SB_ERR_LAYOUT_MISMATCH, a
 *     future version SB_ERR_VERSION, an unknown flag and a mark past the
 *     end SB_ERR_FORMAT (re-checksummed, so the check itself is what
 *     refuses), a missing file SB_ERR_NOT_FOUND; the registry starts a
 *     session with a damaged file empty.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cmocka.h>

#include "core/le.h"
#include "make_model/make_model.h"
#include "model/forward.h"
#include "model/kv.h"
#include "model/model.h"
#include "server/sessions.h"
#include "session/session.h"
#include "session/sfile.h"

#define N 40 /* tokens of the sessions here */

static sb_rt_model *g_m, *g_other; /* two tiny models (seeds 1 and 2) */
static char g_dir[64];             /* a registry's directory */

static sb_rt_model *tiny(uint64_t seed)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_sfile.%ld.gguf", (long)getpid());
    sb_rt_make_opts o;
    assert_int_equal(sb_rt_make_opts_preset(&o, "tiny"), SB_OK);
    o.seed = seed;
    sb_rt_err err = { 0 };
    if (sb_rt_make_model(&o, path, &err) != SB_OK)
        fail_msg("make_model: %s", err.msg);
    sb_rt_model *m;
    if (sb_rt_model_load(path, &m, &err) != SB_OK)
        fail_msg("load: %s", err.msg);
    unlink(path);
    return m;
}

static int setup(void **state)
{
    (void)state;
    g_m = tiny(1);
    g_other = tiny(2);
    snprintf(g_dir, sizeof g_dir, "/tmp/test_sfile.%ld.d", (long)getpid());
    return 0;
}

static void rm_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    assert_int_equal(system(cmd), 0);
}

static int teardown(void **state)
{
    (void)state;
    rm_dir();
    sb_rt_model_free(g_m);
    sb_rt_model_free(g_other);
    return 0;
}

static void tokens_for(uint32_t *t, size_t n, uint32_t salt)
{
    for (size_t i = 0; i < n; i++)
        t[i] = (uint32_t)((i * 37 + salt * 11 + 5) % g_m->hp.n_vocab);
}

/* The default tenant's file of session id in g_dir (its directory made). */
static void session_file(const char *id, char *path, size_t cap)
{
    char d[128];
    snprintf(d, sizeof d, "%s/@default", g_dir);
    mkdir(g_dir, 0700);
    mkdir(d, 0700);
    snprintf(path, cap, "%s/%s.sbs", d, id);
}

static void write_bytes(const char *path, const uint8_t *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    fclose(f);
}

static size_t read_bytes(const char *path, uint8_t *b, size_t cap)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t len = fread(b, 1, cap, f);
    fclose(f);
    return len;
}

/* Save tokens[0, n) the way the runtime does: a session over a RAM bank. */
static void runtime_save(const uint32_t *tokens, size_t n, const char *path)
{
    sb_config cfg;
    sb_config_default(&cfg);
    cfg.ram_bytes = 16u << 20;
    sb_store *st;
    assert_int_equal(sb_store_open(&cfg, &st), SB_OK);
    sb_layout layout;
    uint32_t bpt[2 * SB_RT_MAX_LAYERS];
    assert_int_equal(sb_rt_kv_layout(g_m, 16, bpt, &layout), SB_OK);
    sb_ns *ns;
    assert_int_equal(sb_ns_open(st, &layout, NULL, 0, &ns), SB_OK);
    sb_rt_ctx *ctx;
    assert_int_equal(sb_rt_ctx_new(g_m, 1, 16, &ctx), SB_OK);
    sb_rt_session *s;
    assert_int_equal(sb_rt_session_new(g_m, ctx, ns, &s), SB_OK);
    assert_int_equal(sb_rt_session_resume(s, tokens, n), SB_OK);
    sb_rt_err err = { 0 };
    assert_int_equal(sb_rt_session_save(s, path, &err), SB_OK);
    sb_rt_session_free(s);
    sb_rt_ctx_free(ctx);
    sb_ns_close(ns);
    sb_store_close(st);
}

static const srv_tenant g_tenant = { .name = "default", .scope = "" };

/* A registry over g_dir: session id's JSON and tokens (SB_OK expected). */
static json_t *registry_get(const char *id, uint32_t **tokens, size_t *n)
{
    srv_sessions *r;
    sb_rt_err err = { 0 };
    assert_int_equal(srv_sessions_new(g_dir, g_m->id, 8, &r, &err), SB_OK);
    json_t *j;
    assert_int_equal(srv_sessions_get(r, &g_tenant, id, &j, tokens, n), SB_OK);
    srv_sessions_free(r);
    return j;
}

static json_int_t jint(const json_t *j, const char *key)
{
    json_t *v = json_object_get(j, key);
    assert_non_null(v);
    return json_integer_value(v);
}

/* One turn of session id through a registry over g_dir, written to its
 * file: tokens[0, n), the first n_prompt the prompt "PROMPT" and the rest
 * an answer whose text is "ab" over its first two tokens. */
static void registry_turn(const char *id, const uint32_t *tokens, size_t n, size_t n_prompt)
{
    srv_sessions *r;
    sb_rt_err err = { 0 };
    assert_int_equal(srv_sessions_new(g_dir, g_m->id, 8, &r, &err), SB_OK);
    srv_session *s;
    assert_int_equal(srv_sessions_acquire(r, &g_tenant, id, &s), SB_OK);
    const sb_rt_gen_mark marks[2] = { { 1, 1 }, { 2, 2 } };
    srv_session_turn t = { .tokens = tokens, .n_tokens = n, .n_prompt = n_prompt,
                           .prompt_text = "PROMPT", .prompt_len = 6, .answer_text = "ab",
                           .marks = marks, .n_marks = 2, .cached_tokens = 16,
                           .cached_disk_tokens = 0, .completion_tokens = n - n_prompt,
                           .cache_mode = 1, .restore_s = 0.002 };
    srv_sessions_release(r, s, &t);
    size_t failed = 1;
    srv_sessions_flush(r, &failed); /* (or the registry's writer thread did) */
    assert_int_equal(failed, 0);
    srv_sessions_free(r);
}

/* ---- the layout -------------------------------------------------------------------- */

static void layout_example(void **state)
{
    (void)state;
    /* the dump in sfile.h */
    static const uint8_t want[56] = {
        0x53, 0x42, 0x53, 0x45, 0x53, 0x53, 0x4e, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
        0x0c, 0x0d, 0x0e, 0x0f, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x00,
        0x00, 0x00, 0x2c, 0x01, 0x00, 0x00, 0x07, 0xf9, 0x47, 0xcc, 0x3b, 0x60, 0xd8, 0x82,
    };
    uint32_t tok[2] = { 7, 300 };
    sb_rt_sfile f = { .tokens = tok, .n_tokens = 2 };
    for (int i = 0; i < 16; i++)
        f.model_id[i] = (uint8_t)i;
    uint8_t *b;
    size_t len;
    assert_int_equal(sb_rt_sfile_encode(&f, &b, &len), SB_OK);
    assert_int_equal(len, sizeof want);
    assert_memory_equal(b, want, sizeof want);
    sb_rt_sfile d;
    sb_rt_err err = { 0 };
    assert_int_equal(sb_rt_sfile_decode(b, len, f.model_id, "example", &d, &err), SB_OK);
    assert_false(d.conv);
    assert_int_equal(d.n_tokens, 2);
    assert_memory_equal(d.tokens, tok, sizeof tok);
    assert_null(d.marks);
    assert_null(d.text);
    sb_rt_sfile_free(&d);
    /* with the section: header 128 bytes, then tokens, marks, text */
    sb_rt_sfile_mark mk = { 2 | SB_RT_SFILE_PROMPT_END, 3 };
    f.conv = true, f.marks = &mk, f.n_marks = 1, f.text = "abc", f.text_bytes = 3;
    f.turns = 4, f.created = 5, f.updated = 6;
    f.last = (sb_rt_sfile_turn){ 7, 8, 9, 10, 2, 11 };
    free(b);
    assert_int_equal(sb_rt_sfile_encode(&f, &b, &len), SB_OK);
    assert_int_equal(len, 128 + 8 + 16 + 3 + 8);
    assert_int_equal(sb_rt_get_le32(b + 12), SB_RT_SFILE_CONV);
    assert_int_equal(sb_rt_get_le64(b + 56), 4); /* turns, where the server kept them */
    assert_int_equal(sb_rt_get_le32(b + 128), 7);
    assert_memory_equal(b + 128 + 8 + 16, "abc", 3);
    assert_int_equal(sb_rt_sfile_decode(b, len, f.model_id, "example", &d, &err), SB_OK);
    assert_true(d.conv);
    assert_int_equal(d.n_marks, 1);
    assert_int_equal(d.marks[0].n_tokens, mk.n_tokens);
    assert_int_equal(d.marks[0].text_bytes, 3);
    assert_string_equal(d.text, "abc");
    assert_int_equal(d.turns, 4);
    assert_int_equal(d.created, 5);
    assert_int_equal(d.updated, 6);
    assert_memory_equal(&d.last, &f.last, sizeof f.last);
    sb_rt_sfile_free(&d);
    free(b);
}

/* ---- across the two users ---------------------------------------------------------- */

static void runtime_to_server(void **state)
{
    (void)state;
    rm_dir();
    uint32_t a[N];
    tokens_for(a, N, 1);
    char path[160];
    session_file("alice", path, sizeof path);
    runtime_save(a, N, path);
    uint32_t *t;
    size_t n;
    json_t *j = registry_get("alice", &t, &n);
    assert_int_equal(n, N);
    assert_memory_equal(t, a, sizeof a);
    assert_int_equal(jint(j, "tokens"), N);
    assert_int_equal(jint(j, "turns"), 0);
    assert_int_equal(jint(j, "text_bytes"), 0);
    assert_int_equal(jint(j, "reusable_tokens"), 0); /* no marks: no text to match */
    assert_true(jint(j, "created") > 0);
    json_decref(j);
    free(t);
    /* its next turn writes the section */
    registry_turn("alice", a, N, N - 4);
    sb_rt_sfile f;
    sb_rt_err err = { 0 };
    assert_int_equal(sb_rt_sfile_read(path, g_m->id, &f, &err), SB_OK);
    assert_true(f.conv);
    assert_int_equal(f.turns, 1);
    sb_rt_sfile_free(&f);
}

static void server_to_runtime(void **state)
{
    (void)state;
    rm_dir();
    uint32_t a[N];
    tokens_for(a, N, 2);
    char path[160];
    session_file("bob", path, sizeof path);
    registry_turn("bob", a, N, N - 4);
    sb_rt_err err = { 0 };
    uint32_t *t;
    size_t n;
    assert_int_equal(sb_rt_session_load(g_m, path, &t, &n, &err), SB_OK);
    assert_int_equal(n, N);
    assert_memory_equal(t, a, sizeof a);
    free(t);
    assert_int_equal(sb_rt_session_load(g_other, path, &t, &n, &err), SB_ERR_LAYOUT_MISMATCH);
    /* and what the server keeps beside the tokens comes back in a new registry */
    json_t *j = registry_get("bob", &t, &n);
    assert_int_equal(n, N);
    assert_memory_equal(t, a, sizeof a);
    assert_int_equal(jint(j, "turns"), 1);
    assert_int_equal(jint(j, "text_bytes"), 8); /* "PROMPT" + "ab" */
    assert_int_equal(jint(j, "reusable_tokens"), N - 4 + 2);
    json_t *last = json_object_get(j, "last_turn");
    assert_int_equal(jint(last, "prompt_tokens"), N - 4);
    assert_int_equal(jint(last, "cached_tokens"), 16);
    assert_string_equal(json_string_value(json_object_get(last, "cache_mode")), "warm_prefix");
    json_decref(j);
    free(t);
    /* a runtime session saving over it keeps its tokens, drops the rest */
    runtime_save(a, N - 1, path);
    assert_int_equal(sb_rt_session_load(g_m, path, &t, &n, &err), SB_OK);
    assert_int_equal(n, N - 1);
    free(t);
}

/* ---- legacy files ------------------------------------------------------------------ */

static void legacy_runtime_v1(void **state)
{
    (void)state;
    uint32_t a[N];
    tokens_for(a, N, 3);
    /* sb_rt_session_save's version 1, as it wrote it */
    uint8_t b[40 + 4 * N + 8] = { 0 };
    memcpy(b, "SBSESSN", 8);
    sb_rt_put_le32(b + 8, 1);
    memcpy(b + 16, g_m->id, 16);
    sb_rt_put_le64(b + 32, N);
    for (size_t i = 0; i < N; i++)
        sb_rt_put_le32(b + 40 + 4 * i, a[i]);
    sb_rt_put_le64(b + sizeof b - 8, XXH3_64bits(b, sizeof b - 8));
    char path[160];
    rm_dir();
    session_file("old", path, sizeof path);
    write_bytes(path, b, sizeof b);
    sb_rt_err err = { 0 };
    uint32_t *t;
    size_t n;
    assert_int_equal(sb_rt_session_load(g_m, path, &t, &n, &err), SB_OK);
    assert_int_equal(n, N);
    assert_memory_equal(t, a, sizeof a);
    free(t);
    json_t *j = registry_get("old", &t, &n);
    assert_int_equal(n, N);
    json_decref(j);
    free(t);
    /* version 1 knew no flags */
    sb_rt_put_le32(b + 12, SB_RT_SFILE_CONV);
    sb_rt_put_le64(b + sizeof b - 8, XXH3_64bits(b, sizeof b - 8));
    write_bytes(path, b, sizeof b);
    assert_int_equal(sb_rt_session_load(g_m, path, &t, &n, &err), SB_ERR_FORMAT);
}

static void legacy_server_v1(void **state)
{
    (void)state;
    uint32_t a[N];
    tokens_for(a, N, 4);
    /* snapbank serve's version 1, as it wrote it: two marks, 9 text bytes */
    enum { M = 2, T = 9, LEN = 128 + 4 * N + 16 * M + T + 8 };
    uint8_t b[LEN] = { 0 };
    memcpy(b, "SBSRVSES", 8);
    b[8] = 1;
    memcpy(b + 16, g_m->id, 16);
    const uint64_t head[12] = { N, M, T, 3, 1000, 2000, 30, 20, 4, 10, 2, 1500 };
    for (int i = 0; i < 12; i++)
        sb_rt_put_le64(b + 32 + 8 * i, head[i]);
    uint8_t *p = b + 128;
    for (size_t i = 0; i < N; i++, p += 4)
        sb_rt_put_le32(p, a[i]);
    sb_rt_put_le64(p, 30 | SB_RT_SFILE_PROMPT_END), sb_rt_put_le64(p + 8, 7), p += 16;
    sb_rt_put_le64(p, 32), sb_rt_put_le64(p + 8, 9), p += 16;
    memcpy(p, "PROMPT:ab", T);
    sb_rt_put_le64(b + LEN - 8, XXH3_64bits(b, LEN - 8));
    char path[160];
    rm_dir();
    session_file("carol", path, sizeof path);
    write_bytes(path, b, LEN);
    uint32_t *t;
    size_t n;
    json_t *j = registry_get("carol", &t, &n);
    assert_int_equal(n, N);
    assert_memory_equal(t, a, sizeof a);
    assert_int_equal(jint(j, "turns"), 3);
    assert_int_equal(jint(j, "created"), 1000);
    assert_int_equal(jint(j, "updated"), 2000);
    assert_int_equal(jint(j, "text_bytes"), T);
    assert_int_equal(jint(j, "reusable_tokens"), 32);
    json_t *last = json_object_get(j, "last_turn");
    assert_int_equal(jint(last, "prompt_tokens"), 30);
    assert_int_equal(jint(last, "cached_tokens_disk"), 4);
    assert_int_equal(jint(last, "completion_tokens"), 10);
    assert_string_equal(json_string_value(json_object_get(last, "cache_mode")), "ssd");
    json_decref(j);
    free(t);
    sb_rt_err err = { 0 };
    assert_int_equal(sb_rt_session_load(g_m, path, &t, &n, &err), SB_OK);
    assert_int_equal(n, N);
    assert_memory_equal(t, a, sizeof a);
    free(t);
    /* the registry's next turn rewrites it as version 2 */
    registry_turn("carol", a, N, N - 4);
    uint8_t nb[1024];
    size_t len = read_bytes(path, nb, sizeof nb);
    assert_true(len > 48);
    assert_memory_equal(nb, "SBSESSN", 8);
    assert_int_equal(sb_rt_get_le32(nb + 8), SB_RT_SFILE_VERSION);
    assert_int_equal(sb_rt_get_le32(nb + 12), SB_RT_SFILE_CONV);
    assert_int_equal(sb_rt_get_le64(nb + 56), 4); /* turns: 3 + 1 */
    /* a later version of the server's old magic is not this build's */
    b[8] = 2;
    sb_rt_put_le64(b + LEN - 8, XXH3_64bits(b, LEN - 8));
    write_bytes(path, b, LEN);
    assert_int_equal(sb_rt_session_load(g_m, path, &t, &n, &err), SB_ERR_VERSION);
}

/* ---- refusals ---------------------------------------------------------------------- */

/* Rewrite b's checksum and store it at path; the load's result. */
static int load_rehashed(uint8_t *b, size_t len, const char *path)
{
    sb_rt_put_le64(b + len - 8, XXH3_64bits(b, len - 8));
    write_bytes(path, b, len);
    sb_rt_sfile f;
    sb_rt_err err = { 0 };
    int rc = sb_rt_sfile_read(path, g_m->id, &f, &err);
    if (rc == SB_OK)
        sb_rt_sfile_free(&f);
    else
        assert_non_null(strstr(err.msg, path));
    return rc;
}

static void refusals(void **state)
{
    (void)state;
    rm_dir();
    uint32_t a[N];
    tokens_for(a, N, 5);
    char path[160];
    session_file("dave", path, sizeof path);
    registry_turn("dave", a, N, N - 4);
    uint8_t b[1024], c[1024];
    size_t len = read_bytes(path, b, sizeof b);
    assert_int_equal(len, 128 + 4 * N + 16 * 3 + 8 + 8); /* marks: prompt end, 2 in answer */
    memcpy(c, b, len);
    sb_rt_sfile f;
    sb_rt_err err = { 0 };
    uint32_t *t;
    size_t n;
    for (size_t i = 0; i < len; i++) {
        b[i] ^= 0x10;
        write_bytes(path, b, len);
        int rc = sb_rt_sfile_read(path, g_m->id, &f, &err);
        if (rc != (i >= 8 && i < 12 ? SB_ERR_VERSION : SB_ERR_FORMAT))
            fail_msg("byte %zu flipped: %d (%s)", i, rc, err.msg);
        assert_null(f.tokens);
        assert_int_equal(sb_rt_session_load(g_m, path, &t, &n, &err), rc);
        assert_null(t);
        b[i] ^= 0x10;
    }
    for (size_t cut = 0; cut < len; cut++) {
        write_bytes(path, b, cut);
        if (sb_rt_sfile_read(path, g_m->id, &f, &err) != SB_ERR_FORMAT)
            fail_msg("cut at %zu: %s", cut, err.msg);
    }
    write_bytes(path, b, len);
    assert_int_equal(sb_rt_sfile_read(path, g_other->id, &f, &err), SB_ERR_LAYOUT_MISMATCH);
    assert_non_null(strstr(err.msg, path));
    /* well-formed but refused by the check itself */
    sb_rt_put_le32(b + 8, SB_RT_SFILE_VERSION + 1);
    assert_int_equal(load_rehashed(b, len, path), SB_ERR_VERSION);
    memcpy(b, c, len);
    sb_rt_put_le32(b + 8, 0);
    assert_int_equal(load_rehashed(b, len, path), SB_ERR_VERSION);
    memcpy(b, c, len);
    sb_rt_put_le32(b + 8, 1); /* version 1 knew no flags, so no section */
    assert_int_equal(load_rehashed(b, len, path), SB_ERR_FORMAT);
    memcpy(b, c, len);
    sb_rt_put_le32(b + 12, SB_RT_SFILE_CONV | 2);
    assert_int_equal(load_rehashed(b, len, path), SB_ERR_FORMAT);
    memcpy(b, c, len);
    sb_rt_put_le32(b + 12, 0); /* no section: the sizes no longer add up */
    assert_int_equal(load_rehashed(b, len, path), SB_ERR_FORMAT);
    memcpy(b, c, len);
    sb_rt_put_le64(b + 128 + 4 * N, N + 1); /* the first mark past the tokens */
    assert_int_equal(load_rehashed(b, len, path), SB_ERR_FORMAT);
    memcpy(b, c, len);
    sb_rt_put_le64(b + 128 + 4 * N + 8, 9); /* ... past the text */
    assert_int_equal(load_rehashed(b, len, path), SB_ERR_FORMAT);
    memcpy(b, c, len);
    sb_rt_put_le32(b + 128, g_m->hp.n_vocab); /* a token the model lacks */
    sb_rt_put_le64(b + len - 8, XXH3_64bits(b, len - 8));
    write_bytes(path, b, len);
    assert_int_equal(sb_rt_session_load(g_m, path, &t, &n, &err), SB_ERR_FORMAT);
    memcpy(b, c, len);
    assert_int_equal(load_rehashed(b, len, path), SB_OK); /* the control */
    /* the registry starts a session whose file is damaged empty */
    b[len - 1] ^= 1;
    write_bytes(path, b, len);
    json_t *j = registry_get("dave", &t, &n);
    assert_int_equal(n, 0);
    assert_null(t);
    assert_int_equal(jint(j, "turns"), 0);
    json_decref(j);
    unlink(path);
    assert_int_equal(sb_rt_sfile_read(path, g_m->id, &f, &err), SB_ERR_NOT_FOUND);
    assert_int_equal(sb_rt_session_load(g_m, path, &t, &n, &err), SB_ERR_NOT_FOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layout_example),   cmocka_unit_test(runtime_to_server),
        cmocka_unit_test(server_to_runtime), cmocka_unit_test(legacy_runtime_v1),
        cmocka_unit_test(legacy_server_v1), cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
