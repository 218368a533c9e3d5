/* demo.c -- `snapbank demo`: the main demo. It makes the `small` model,
 * writes a long system prompt (over 2,000 tokens) and two chat scripts,
 * then runs `snapbank chat` three times as separate processes over one
 * bank directory:
 *   1. alice, a new session: turn 1 computes everything (cold), later
 *      turns restore the conversation from RAM (warm_prefix);
 *   2. a restart: alice resumes, her conversation read back from the disk
 *      tier (ssd), then warm_prefix again;
 *   3. bob, a new session with the same system prompt: it comes from disk.
 * Each turn prints its cache_mode, cached tokens and time to first token.
 * Exit status: 0 success, 1 failure, 2 usage error. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "make_model/make_model.h"
#include "model/model.h"
#include "text/tokenizer.h"

#define SYSTEM_MIN_TOKENS 2048

static void demo_usage(FILE *f)
{
    fprintf(f,
            "usage: snapbank demo [--dir DIR] [--keep] [--model FILE] [--threads N] [-n N]\n\n"
            "A chat with a long system prompt over the bank, in three processes: a new\n"
            "session (cold, then warm_prefix), the same session after a restart (ssd),\n"
            "and a second session sharing the system prompt. Prints per turn the\n"
            "cache_mode, the cached tokens and the time to first token.\n\n"
            "options:\n"
            "  --dir DIR      work in DIR (default: a new directory under /var/tmp,\n"
            "                 removed at the end unless --keep)\n"
            "  --keep         keep the work directory (model, bank, scripts)\n"
            "  --model FILE   use this GGUF model instead of making the small one\n"
            "  --threads N    threads (default: every online CPU)\n"
            "  -n N           tokens each answer generates (default 16)\n\n"
            "exit status: 0 success, 1 failure, 2 usage.\n");
}

/* A system prompt of rules built from a seed: plain sentences whose words
 * vary, so it is long text rather than one phrase repeated. */
static char *system_prompt(const sb_rt_model *m, size_t *n_tok)
{
    static const char *const subj[] = { "The bank", "A session", "The writer", "Every page",
                                        "The runtime", "A checksum", "The index", "The operator" };
    static const char *const verb[] = { "keeps", "restores", "writes", "checks", "counts",
                                        "drops", "reads", "reports" };
    static const char *const obj[] = { "the state of a prompt", "a prefix it has seen",
                                       "one record per page", "the bytes of every tensor",
                                       "the time to the first token", "what the budget allows",
                                       "the oldest segment first", "pages that sessions share" };
    static const char *const cond[] = { "a turn begins", "the disk is busy", "memory runs short",
                                        "a restart happens", "the model is answering",
                                        "a record fails its check", "an hour has passed",
                                        "two tenants ask at once" };
    size_t cap = 64 * 1024, len = 0;
    char *t = malloc(cap);
    if (!t)
        return NULL;
    len += (size_t)snprintf(t, cap, "You are the operator's assistant for a storage system "
                                    "that keeps model state. Follow these rules.\n");
    uint64_t x = 20261202;
    for (int rule = 1;; rule++) {
        if (rule % 25 == 0) { /* tokenizing is cheap at this size */
            size_t need = 0;
            sb_rt_tok_encode(m->tok, t, len, true, NULL, 0, &need);
            if (need >= SYSTEM_MIN_TOKENS) {
                *n_tok = need;
                return t;
            }
        }
        int r[6];
        for (int i = 0; i < 6; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            r[i] = (int)((x >> 33) % 8);
        }
        if (cap - len < 512) {
            char *nt = realloc(t, cap *= 2);
            if (!nt) {
                free(t);
                return NULL;
            }
            t = nt;
        }
        len += (size_t)snprintf(t + len, cap - len,
                                "Rule %d. %s %s %s when %s; %s never %s %s twice.\n", rule,
                                subj[r[0]], verb[r[1]], obj[r[2]], cond[r[3]], subj[r[4]],
                                verb[r[5]], obj[(r[2] + 3) % 8]);
    }
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "snapbank demo: %s: cannot write: %s\n", path, strerror(errno));
        if (f)
            fclose(f);
        return 1;
    }
    return 0;
}

/* Run `snapbank chat ...` as a child process (this executable), wait. */
static int run_chat(const char *const *args)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "snapbank demo: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        execv("/proc/self/exe", (char *const *)args);
        fprintf(stderr, "snapbank demo: cannot run /proc/self/exe: %s\n", strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return 1;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "snapbank demo: the chat process failed (status %d)\n",
                WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return 1;
    }
    return 0;
}

int sb_cli_demo(int argc, char **argv)
{
    const char *dir_opt = NULL, *model_opt = NULL, *threads = NULL, *n_gen = "16";
    int keep = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            demo_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--dir") && v) {
            dir_opt = v, i++;
        } else if (!strcmp(a, "--model") && v) {
            model_opt = v, i++;
        } else if (!strcmp(a, "--threads") && v) {
            threads = v, i++;
        } else if (!strcmp(a, "-n") && v) {
            n_gen = v, i++;
        } else if (!strcmp(a, "--keep")) {
            keep = 1;
        } else {
            fprintf(stderr, "snapbank demo: bad argument '%s'\n\n", a);
            demo_usage(stderr);
            return 2;
        }
    }
    char dir[1024], model[1200], bank[1200], sys[1200], s1[1200], s2[1200], s3[1200];
    if (dir_opt) {
        if (snprintf(dir, sizeof dir, "%s", dir_opt) >= (int)sizeof dir ||
            (mkdir(dir, 0700) != 0 && errno != EEXIST)) {
            fprintf(stderr, "snapbank demo: %s: cannot create: %s\n", dir_opt, strerror(errno));
            return 1;
        }
        keep = 1;
    } else {
        snprintf(dir, sizeof dir, "/var/tmp/snapbank-demo-XXXXXX");
        if (!mkdtemp(dir)) {
            fprintf(stderr, "snapbank demo: %s: cannot create: %s\n", dir, strerror(errno));
            return 1;
        }
    }
    snprintf(model, sizeof model, "%s/small.gguf", dir);
    snprintf(bank, sizeof bank, "%s/bank", dir);
    snprintf(sys, sizeof sys, "%s/system.txt", dir);
    snprintf(s1, sizeof s1, "%s/alice-1.txt", dir);
    snprintf(s2, sizeof s2, "%s/alice-2.txt", dir);
    snprintf(s3, sizeof s3, "%s/bob.txt", dir);
    const char *model_path = model_opt ? model_opt : model;
    int ret = 1;
    sb_rt_err err = { 0 };
    sb_rt_model *m = NULL;
    char *text = NULL;
    if (!model_opt) {
        sb_rt_make_opts mo;
        sb_rt_make_opts_preset(&mo, "small");
        printf("making the small model (dim 768, 12 layers, F16, random weights) ...\n");
        fflush(stdout);
        if (sb_rt_make_model(&mo, model, &err) != SB_OK) {
            fprintf(stderr, "snapbank demo: %s\n", err.msg);
            goto out;
        }
    }
    if (sb_rt_model_load(model_path, &m, &err) != SB_OK) {
        fprintf(stderr, "snapbank demo: %s\n", err.msg);
        goto out;
    }
    if (!m->tok) {
        fprintf(stderr, "snapbank demo: %s: %s\n", model_path, m->tok_error);
        goto out;
    }
    size_t n_sys = 0;
    if (!(text = system_prompt(m, &n_sys)))
        goto out;
    if (write_file(sys, text) ||
        write_file(s1, "What do you keep for me?\n"
                       "How do you know a page is still good?\n"
                       "And what happens when the disk fills up?\n") ||
        write_file(s2, "I am back after the restart. Do you remember?\n"
                       "Then tell me about the write budget.\n") ||
        write_file(s3, "Hello, I am new here. What are the rules?\n"))
        goto out;
    printf("work directory %s; system prompt %zu tokens; answers of %s tokens\n\n", dir, n_sys,
           n_gen);

    const char *th = threads ? threads : "0";
    char thbuf[32];
    if (!threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        snprintf(thbuf, sizeof thbuf, "%ld", n > 0 ? n : 1);
        th = thbuf;
    }
    const char *alice1[] = { "snapbank", "chat", model_path, "--bank-dir", bank, "--session",
                             "alice", "--system-file", sys, "--script", s1, "-n", n_gen,
                             "--threads", th, "--table", NULL };
    const char *alice2[] = { "snapbank", "chat", model_path, "--bank-dir", bank, "--session",
                             "alice", "--script", s2, "-n", n_gen, "--threads", th, "--table",
                             NULL };
    const char *bob[] = { "snapbank", "chat", model_path, "--bank-dir", bank, "--session", "bob",
                          "--system-file", sys, "--script", s3, "-n", n_gen, "--threads", th,
                          "--table", NULL };
    printf("== process 1: alice starts a session (cold, then warm_prefix from RAM)\n");
    if (run_chat(alice1))
        goto out;
    printf("\n== process 2, a restart: alice resumes (her conversation read from disk: ssd)\n");
    if (run_chat(alice2))
        goto out;
    printf("\n== process 3: bob starts a session with the same system prompt (from disk)\n");
    if (run_chat(bob))
        goto out;
    printf("\ncold computes every prompt token; warm_prefix maps the bank's RAM pages with no "
           "copy;\nssd reads the pages a previous process wrote. Every restored turn gives the "
           "same\nlogits as a cold one (tests/test_session.c checks it bit for bit).\n");
    ret = 0;
out:
    free(text);
    sb_rt_model_free(m);
    if (!keep) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "snapbank demo: could not remove %s\n", dir);
    } else {
        printf("kept %s\n", dir);
    }
    return ret;
}
