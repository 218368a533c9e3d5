/* rtcli.h -- what `snapbank run` and `snapbank chat` share: the model,
 * sampling and bank options, opening a model with a bank and a session
 * over it, tokenizing text, and the per-turn report.
 *
 * A bank directory (--bank-dir DIR) holds
 *   DIR/store/                      the snapbank store (its disk tier)
 *   DIR/sessions/ID.session         each session's tokens (session.h)
 * Without --bank-dir the bank is in RAM only and lives for the process.
 */
#ifndef SB_RTCLI_H
#define SB_RTCLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model/forward.h"
#include "model/model.h"
#include "model/sample.h"
#include "session/session.h"
#include "snapbank.h"

/* --ssd-session-cache */
enum { RT_SSD_ON = 0, RT_SSD_OFF = 1, RT_SSD_WRITE_ONLY = 2 };

/* --engine: who computes. builtin: snapbank's own runtime, its KV in the
 * bank's pages; llama.cpp: libllama computes and the bank keeps its state
 * through the llama.cpp connector (cli/llama_engine.h; built only where
 * llama.cpp was found, SB_CLI_LLAMA). */
enum { RT_ENGINE_BUILTIN = 0, RT_ENGINE_LLAMA = 1 };

/* The shared tier's tuning options (run, chat and serve take them); 0:
 * the store's default (sb_config). */
typedef struct rt_shared_tune {
    uint64_t timeout_ms;  /* --shared-timeout MS: shared_timeout_ms */
    uint64_t ttl_s;       /* --shared-ttl S: shared_ttl_s */
    uint64_t publish_mib; /* --shared-publish-mib N: MiB/s of publishing */
    const char *secret_file; /* --shared-secret-file F: shared_secret_file */
    const char *given;    /* the last of them given, or NULL */
} rt_shared_tune;

typedef struct rt_opts {
    const char *model;
    uint64_t n_gen, threads, page_tokens, batch, seed, top_k, ram_mib, min_prefix;
    uint64_t boundary_grid, boundary_kib; /* hybrid models (session.h) */
    float temp, top_p;
    int print_ids, stop_eos;
    const char *bank_dir, *session, *scope;
    int ssd;        /* RT_SSD_* */
    int durability; /* sb_durability of the bank */
    const char *shared;      /* --shared redis://HOST:PORT[,...], or NULL */
    const char *shared_auth; /* --shared-auth FILE, or NULL */
    rt_shared_tune shared_tune; /* --shared-timeout, -ttl, -publish-mib */
    int engine;              /* RT_ENGINE_* */
} rt_opts;

/* Credentials for the shared tier, read from a file (rt_shared_auth). */
typedef struct rt_auth {
    char user[256];      /* "" : none (password only) */
    char password[512];  /* "" : no AUTH */
} rt_auth;

/* rt_shared_tune_opt -- when a is one of the options above, parse v into
 * *t and return 1 with *bad set (-1: a bad or missing value); else 0. */
int rt_shared_tune_opt(const char *a, const char *v, rt_shared_tune *t, int *bad);

/* rt_shared_tune_apply -- put *t into cfg's shared_* options. */
void rt_shared_tune_apply(const rt_shared_tune *t, sb_config *cfg);

/* The shared-tier options' help text (run, chat and serve print it). */
extern const char rt_shared_help[];

/* rt_shared_seeds -- the seeds of a --shared URL
 * ("redis://HOST:PORT[,HOST:PORT...]"): a pointer into url past the
 * scheme. A URL with credentials (user:password@) is refused: they would
 * show in the process list; use --shared-auth. Prints the fault naming
 * cmd. Returns: the seeds; NULL when refused. */
const char *rt_shared_seeds(const char *url, const char *cmd);

/* rt_shared_auth -- read path: one line holding "PASSWORD" or "USER
 * PASSWORD" (separated by blanks; a trailing newline is ignored). A file
 * that others may read or write (mode & 077) is refused, as ssh refuses
 * a key file. Prints the fault naming cmd and the file. Returns: 0; 1
 * refused or unreadable (*a zeroed). */
int rt_shared_auth(const char *path, rt_auth *a, const char *cmd);

/* The common options' help text, for a command's usage. */
extern const char rt_opts_help[];

/* rt_parse_u64 -- s as a decimal in [lo, hi] into *out. Returns: 0; -1 for
 * NULL, empty, negative, not a number, or out of range (*out unchanged). */
int rt_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* rt_opts_default -- every common option at its default. */
void rt_opts_default(rt_opts *o);

/* rt_opts_parse -- when argv[*i] is a common option, take it (and its
 * value, advancing *i). Returns: 1 taken; 0 not a common option; -1 a bad
 * or missing value. */
int rt_opts_parse(rt_opts *o, int argc, char **argv, int *i);

/* A command's own options: given argument a and the one after it (v, NULL
 * at the end), returns how many it takes (1 or 2), 0 when a is not its. */
typedef int (*rt_args_fn)(void *ctx, const char *a, const char *v);

/* rt_parse_args -- fill o from argv[1..]: the common options, the
 * command's own (own, with ctx), --help / -h, and MODEL (the one argument
 * not starting with '-'). A bad argument is printed naming cmd, with
 * usage(stderr). Returns: 0; 1 help printed (usage(stdout)); 2 usage error.
 * The caller then checks its own needs and calls rt_opts_check. */
int rt_parse_args(rt_opts *o, int argc, char **argv, const char *cmd, void (*usage)(FILE *),
                  rt_args_fn own, void *ctx);

/* rt_opts_check -- the checks across options (--session needs
 * --bank-dir, a session ID's characters, --engine llama.cpp in a build
 * without llama.cpp). Prints the fault naming cmd.
 * Returns: 0 ok; 2 usage error. */
int rt_opts_check(const rt_opts *o, const char *cmd);

/* rt_bank_paths -- with --bank-dir, create DIR and DIR/sessions and write
 * DIR/store into store_dir and, with --session, DIR/sessions/ID<suffix>
 * into sess_path (both 4096 bytes; "" when not used). Prints the fault
 * naming cmd. Returns: 0; 1 failure (a path too long, a directory that
 * cannot be made). */
int rt_bank_paths(const rt_opts *o, const char *suffix, char *store_dir, char *sess_path,
                  const char *cmd);

/* rt_bank_config -- the store configuration the options ask for (RAM
 * budget, --min-prefix, the disk tier in store_dir unless
 * --ssd-session-cache off, its write mode and durability, the shared
 * tier), sequences of up to max_seq_tokens. With --shared-auth the
 * credentials are read into *auth, which cfg then points at: wipe it once
 * the store is open. Prints the fault naming cmd. Returns: 0; 1 failure. */
int rt_bank_config(const rt_opts *o, uint32_t max_seq_tokens, const char *store_dir,
                   sb_config *cfg, rt_auth *auth, const char *cmd);

/* A model with its bank, context, sampler and one session. */
typedef struct rt_env {
    sb_rt_model *m;
    sb_store *st;
    sb_ns *ns;
    sb_rt_ctx *ctx;
    sb_rt_session *s;
    sb_rt_sampler smp;
    uint32_t *bpt;
    char sess_path[4096]; /* "" without --session */
    int resumed;          /* the session file held tokens */
    double t_load;        /* seconds to load the model */
    double t_open;        /* seconds to open the store (recovery) */
    rt_auth auth;         /* --shared-auth's credentials (wiped after open) */
} rt_env;

/* rt_env_open -- load o->model, open the bank (creating the directories),
 * the namespace of (model, o->scope), a context and a session; with
 * --session, resume it from its file when there is one. Prints what failed
 * naming cmd and the file. Returns: 0; 1 failure (e is then closed). */
int rt_env_open(rt_env *e, const rt_opts *o, const char *cmd);

/* rt_env_save -- write the session's tokens to its file (with --session).
 * Returns: 0; 1 failure (printed). */
int rt_env_save(rt_env *e, const char *cmd);

/* rt_env_close -- close everything (the store writes and syncs what its
 * disk tier still holds). A close that fails is printed naming cmd and
 * o->bank_dir (cmd NULL: silent). Returns: 0; 1 the store's close failed
 * (sb_store_close: its last writes may be lost). */
int rt_env_close(rt_env *e, const char *cmd, const rt_opts *o);

/* rt_tokenize -- ids of text (BOS first when bos and the model asks for
 * it) into a malloc'd array (empty text without BOS: *n is 0). Returns: 0;
 * 1 failure (printed, naming cmd). */
int rt_tokenize(const sb_rt_model *m, const char *text, bool bos, uint32_t **out, size_t *n,
                const char *cmd);

/* rt_report -- one line about a turn: where its prefix came from, tokens
 * cached and computed, restore time, time to first token, speeds, the miss
 * reason, the restore-or-recompute choice and, with a disk tier, what it
 * made of the turn's pages (disk_write=queued:Q,written:W[,deferred:D]
 * [,dirty:Y],denied:X[(reason:n,...)] durable=yes|pending|no). */
void rt_report(FILE *f, const char *label, const sb_rt_turn *r);

/* rt_table_header, rt_table_row -- the same report as an aligned table
 * (session, turn, cache_mode, prompt, cached, from disk, computed, restore
 * and first-token milliseconds, decode speed, durable, miss reason). */
void rt_table_header(FILE *f);
void rt_table_row(FILE *f, const char *session, int turn, const sb_rt_turn *r);

/* rt_durable_word -- a turn's durability in a word: "yes" (on disk and
 * synced when the turn returned), "pending" (queued or waiting: synced
 * later), "no" (a page it needs was denied or failed: RAM only), "-" (no
 * disk tier). Returns: a static string. */
const char *rt_durable_word(const sb_write_outcome *d);


#endif /* SB_RTCLI_H */
