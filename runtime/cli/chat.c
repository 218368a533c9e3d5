/* chat.c -- `snapbank chat MODEL`: a multi-turn conversation over the bank,
 * interactive (a line per message from stdin) or scripted from a file,
 * printing each turn's report: where its prefix came from (cold,
 * warm_prefix, ssd), the tokens cached and computed, the time to first
 * token. With --bank-dir and --session the conversation survives the
 * process: a later `chat` with the same session resumes it, its KV read
 * back from the disk tier instead of recomputed.
 *
 * The prompt of a turn is the conversation so far followed by
 * "\nUser: MESSAGE\nAssistant:"; a new session starts with BOS and the
 * system prompt (--system or --system-file) and a blank line.
 * Exit status: 0 success, 1 failure, 2 usage error. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli/rtcli.h"
#ifdef SB_CLI_LLAMA
#include "cli/llama_engine.h"
#endif
#include "kernels/kernels.h"
#include "text/tokenizer.h"

static void chat_usage(FILE *f)
{
    fprintf(f,
            "usage: snapbank chat MODEL [--script FILE] [--system TEXT | --system-file FILE]\n"
            "                     [options]\n\n"
            "A multi-turn conversation whose KV cache is kept in the snapbank bank: each\n"
            "turn restores what the bank holds of its prompt (the whole conversation so\n"
            "far) and computes only the rest. Messages come one per line from --script\n"
            "FILE (blank lines and lines starting with '#' skipped) or from stdin. After\n"
            "each turn a line reports cache_mode (cold, warm_prefix, ssd, remote), the cached\n"
            "tokens, the time to first token and the speeds. With --engine llama.cpp,\n"
            "llama.cpp computes and the prompt is the conversation rendered by the model's\n"
            "chat template (llama_chat_apply_template; without one, the plain format).\n\n"
            "options:\n"
            "  --script FILE          read the user's messages from FILE\n"
            "  --system TEXT          the system prompt of a new session\n"
            "  --system-file FILE     ...read from FILE\n"
            "  --quiet                print the reports only, not the conversation\n"
            "  --table                reports as a table (implies --quiet)\n"
            "%s%s\n"
            "exit status: 0 success, 1 failure, 2 usage.\n",
            rt_opts_help, rt_shared_help);
}

typedef struct chat_opts {
    rt_opts rt;
    const char *script, *system, *system_file;
    int quiet, table;
} chat_opts;

/* chat's own options (rt_args_fn). */
static int chat_arg(void *ctx, const char *a, const char *v)
{
    chat_opts *o = ctx;
    if (!strcmp(a, "--quiet"))
        return o->quiet = 1, 1;
    if (!strcmp(a, "--table"))
        return o->table = o->quiet = 1, 1;
    const char **slot = !strcmp(a, "--script")        ? &o->script
                        : !strcmp(a, "--system")      ? &o->system
                        : !strcmp(a, "--system-file") ? &o->system_file
                                                      : NULL;
    if (!slot || !v)
        return 0;
    *slot = v;
    return 2;
}

static int parse(int argc, char **argv, chat_opts *o)
{
    memset(o, 0, sizeof *o);
    int rc = rt_parse_args(&o->rt, argc, argv, "chat", chat_usage, chat_arg, o);
    if (rc)
        return rc;
    if (!o->rt.model || (o->system && o->system_file)) {
        fprintf(stderr, "snapbank chat: need MODEL, and at most one of --system, "
                        "--system-file\n\n");
        chat_usage(stderr);
        return 2;
    }
    return rt_opts_check(&o->rt, "chat");
}

/* The whole of a text file, NUL-terminated. NULL on failure (printed). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "snapbank chat: %s: cannot open: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t got = fread(b + n, 1, cap - n - 1, f);
        n += got;
        if (n + 1 < cap)
            break;
        char *nb = realloc(b, cap *= 2);
        if (!nb)
            free(b);
        b = nb;
    }
    int err = ferror(f);
    fclose(f);
    if (!b || err) {
        fprintf(stderr, "snapbank chat: %s: cannot read%s\n", path, b ? "" : ": out of memory");
        free(b);
        return NULL;
    }
    b[n] = 0;
    if (strlen(b) != n) {
        fprintf(stderr, "snapbank chat: %s: holds a NUL byte: not a text file\n", path);
        free(b);
        return NULL;
    }
    return b;
}

typedef struct printer {
    const sb_rt_model *m;
    int quiet, ids;
    uint32_t prev;
} printer;

static void print_token(void *ctx, uint32_t id)
{
    printer *p = ctx;
    if (p->quiet)
        return;
    if (p->ids || !p->m->tok) {
        printf(" %" PRIu32, id);
    } else {
        char buf[256];
        size_t n = 0;
        if (sb_rt_tok_piece(p->m->tok, id, p->prev, buf, sizeof buf, &n) == SB_OK)
            for (size_t i = 0; i < n; i++) /* one line per answer */
                putchar(buf[i] == '\n' ? ' ' : buf[i]);
    }
    p->prev = id;
    fflush(stdout);
}

/* Append text's tokens (no BOS) to the turn's input. */
static int add_text(const sb_rt_model *m, const char *text, uint32_t **in, size_t *n)
{
    uint32_t *t;
    size_t k;
    if (rt_tokenize(m, text, false, &t, &k, "chat"))
        return 1;
    uint32_t *nb = realloc(*in, (*n + k) * sizeof *nb);
    if (!nb) {
        free(t);
        fprintf(stderr, "snapbank chat: out of memory\n");
        return 1;
    }
    memcpy(nb + *n, t, k * sizeof *t);
    *in = nb, *n += k;
    free(t);
    return 0;
}

/* Print the report of turn turn_no (a table row or a line). */
static void report(const chat_opts *o, int turn_no, const sb_rt_turn *r)
{
    const char *who = o->rt.session ? o->rt.session : "chat";
    if (o->table) {
        if (turn_no == 1)
            rt_table_header(stdout);
        rt_table_row(stdout, who, turn_no, r);
    } else {
        char label[160];
        snprintf(label, sizeof label, "[%s turn %d]", who, turn_no);
        rt_report(stdout, label, r);
    }
    fflush(stdout);
}

/* One turn for message msg (its line, without the newline). */
static int chat_turn(rt_env *e, const chat_opts *o, const char *system, const char *msg,
                     int turn_no)
{
    uint32_t *in = NULL;
    size_t n_in = 0, n_hist = 0;
    sb_rt_session_tokens(e->s, &n_hist);
    int ret = 1;
    if (n_hist == 0) { /* a new session: BOS, the system prompt */
        const char *sys = system ? system : "";
        if (rt_tokenize(e->m, sys, true, &in, &n_in, "chat") ||
            (*sys && add_text(e->m, "\n\n", &in, &n_in)))
            goto out;
    }
    size_t len = strlen("\nUser: ") + strlen(msg) + strlen("\nAssistant:") + 1;
    char *text = malloc(len);
    if (!text)
        goto out;
    snprintf(text, len, "\nUser: %s\nAssistant:", msg);
    int bad = add_text(e->m, text, &in, &n_in);
    free(text);
    if (bad)
        goto out;
    if (n_hist + n_in + o->rt.n_gen > e->m->hp.n_ctx) {
        fprintf(stderr, "snapbank chat: the conversation (%zu tokens) and this turn (%zu + %"
                PRIu64 ") exceed the model's context of %" PRIu32 "; start a new session\n",
                n_hist, n_in, o->rt.n_gen, e->m->hp.n_ctx);
        goto out;
    }
    if (!o->quiet)
        printf("user> %s\nassistant>", msg);
    printer p = { e->m, o->quiet, o->rt.print_ids, in[n_in - 1] };
    uint32_t stop = o->rt.stop_eos && e->m->tok ? sb_rt_tok_eos(e->m->tok) : UINT32_MAX;
    sb_rt_gen g = { o->rt.n_gen, &e->smp, stop, print_token, &p, NULL };
    sb_rt_turn r;
    int rc = sb_rt_session_turn(e->s, in, n_in, &g, &r);
    if (!o->quiet)
        printf("\n");
    if (rc != SB_OK) {
        fprintf(stderr, "snapbank chat: turn %d failed: %s\n", turn_no, sb_strerror(rc));
        goto out;
    }
    report(o, turn_no, &r);
    ret = rt_env_save(e, "chat");
out:
    free(in);
    return ret;
}

#ifdef SB_CLI_LLAMA
typedef struct llama_printer {
    const rt_llama *L;
    int quiet, ids;
} llama_printer;

static void llama_print_token(void *ctx, uint32_t id)
{
    llama_printer *p = ctx;
    if (p->quiet)
        return;
    if (p->ids) {
        printf(" %" PRIu32, id);
    } else {
        char buf[256];
        size_t n;
        rt_llama_piece(p->L, id, buf, sizeof buf, &n);
        for (size_t i = 0; i < n; i++) /* one line per answer */
            putchar(buf[i] == '\n' ? ' ' : buf[i]);
    }
    fflush(stdout);
}

/* One turn with --engine llama.cpp: the input from the chat template. */
static int llama_chat_turn(rt_llama *L, const chat_opts *o, const char *system, const char *msg,
                           int turn_no)
{
    uint32_t *in;
    size_t n_in;
    if (rt_llama_chat_input(L, system, msg, &in, &n_in, "chat"))
        return 1;
    if (!o->quiet)
        printf("user> %s\nassistant>", msg);
    llama_printer p = { L, o->quiet, o->rt.print_ids };
    rt_llama_gen g = { o->rt.n_gen, o->rt.stop_eos, llama_print_token, &p, NULL };
    sb_rt_turn r;
    int rc = rt_llama_turn(L, in, n_in, &g, &r, "chat");
    free(in);
    if (!o->quiet)
        printf("\n");
    if (rc) {
        fprintf(stderr, "snapbank chat: turn %d failed\n", turn_no);
        return 1;
    }
    report(o, turn_no, &r);
    return rt_llama_save_session(L, "chat");
}
#endif

int sb_cli_chat(int argc, char **argv)
{
    chat_opts o;
    int prc = parse(argc, argv, &o);
    if (prc)
        return prc == 1 ? 0 : prc;
    char *system = NULL, *script = NULL;
    if (o.system_file && !(system = slurp(o.system_file)))
        return 1;
    if (o.script && !(script = slurp(o.script))) {
        free(system);
        return 1;
    }
    rt_env e;
#ifdef SB_CLI_LLAMA
    rt_llama *L = NULL;
    if (o.rt.engine == RT_ENGINE_LLAMA) {
        memset(&e, 0, sizeof e);
        if (rt_llama_open(&o.rt, "chat", &L)) {
            free(system), free(script);
            return 1;
        }
        rt_llama_banner(L, "chat");
    } else
#endif
    {
        if (rt_env_open(&e, &o.rt, "chat")) {
            free(system), free(script);
            return 1;
        }
        fprintf(stderr, "chat: %s, %u threads, %s kernels; bank %s (opened in %.3f s)%s%s\n",
                o.rt.model, sb_rt_ctx_threads(e.ctx), sb_rt_kernels_best()->name,
                o.rt.bank_dir ? o.rt.bank_dir : "in RAM", e.t_open,
                e.resumed ? "; resumed session " : "", e.resumed ? o.rt.session : "");
    }
    const char *sys = o.system ? o.system : system;
    int ret = 0, turn_no = 0;
    char *line = NULL;
    size_t cap = 0;
    char *cursor = script;
    int tty = !script && isatty(STDIN_FILENO);
    for (;;) {
        char *msg;
        if (script) {
            if (!*cursor)
                break;
            msg = cursor;
            char *nl = strchr(cursor, '\n');
            cursor = nl ? (*nl = 0, nl + 1) : cursor + strlen(cursor);
        } else {
            if (tty) {
                fputs("> ", stdout);
                fflush(stdout);
            }
            ssize_t got = getline(&line, &cap, stdin);
            if (got < 0)
                break;
            if (got && line[got - 1] == '\n')
                line[got - 1] = 0;
            msg = line;
        }
        size_t ml = strlen(msg);
        if (ml && msg[ml - 1] == '\r')
            msg[--ml] = 0;
        if (!ml || msg[0] == '#')
            continue;
#ifdef SB_CLI_LLAMA
        if (L) {
            if ((ret = llama_chat_turn(L, &o, sys, msg, ++turn_no)) != 0)
                break;
            continue;
        }
#endif
        if ((ret = chat_turn(&e, &o, sys, msg, ++turn_no)) != 0)
            break;
    }
    free(line);
    free(system), free(script);
#ifdef SB_CLI_LLAMA
    if (L) {
        if (rt_llama_close(L, "chat") && !ret)
            ret = 1;
        return ret;
    }
#endif
    if (rt_env_close(&e, "chat", &o.rt) && !ret)
        ret = 1;
    return ret;
}
