/* bench_chat_tmpl.c -- what a chat template costs per request: rendering a
 * conversation through each fixture template (tests/data/templates) with
 * its family renderer and with the interpreter, and reading the template
 * (parse and probes). Conversations: 8 turns of 200 bytes a message (a
 * chat), and 64 turns of 2 KiB (an agent with tool-output-sized turns,
 * ~256 KiB of prompt). Times are CPU time of this process
 * (CLOCK_PROCESS_CPUTIME_ID) per render, the median over repetitions of a
 * batch of renders, so a loaded machine moves them little.
 * Every render's text is checked to hold every message's content and the
 * family and interpreter texts to be equal, so a broken renderer fails the
 * run (exit 1).
 *
 * Usage: bench_chat_tmpl [--quick] [--templates DIR]
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "template/chat_tmpl.h"

#ifndef SB_BENCH_TEMPLATES
#define SB_BENCH_TEMPLATES "tests/data/templates"
#endif

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
    fclose(f);
    return s;
}

typedef struct conv {
    sb_rt_chat_msg *m;
    size_t n;
    char **text;
} conv;

/* turns user/assistant pairs after a system message; bytes a message */
static conv make_conv(size_t turns, size_t bytes)
{
    conv c = { .n = 1 + 2 * turns };
    c.m = calloc(c.n, sizeof *c.m);
    c.text = calloc(c.n, sizeof *c.text);
    for (size_t i = 0; i < c.n; i++) {
        c.text[i] = malloc(bytes + 1);
        for (size_t k = 0; k < bytes; k++)
            c.text[i][k] = "abcdefghij klmnopqrst uvwxyz "[(i * 7 + k * 13) % 29];
        snprintf(c.text[i], bytes + 1, "m%zu", i); /* a unique head, no padding to trim */
        c.text[i][strlen(c.text[i])] = ' ';
        c.text[i][bytes - 1] = 'z';
        c.text[i][bytes] = '\0';
        c.m[i].role = i == 0 ? "system" : i % 2 ? "user" : "assistant";
        c.m[i].content = c.text[i];
    }
    return c;
}

static void free_conv(conv *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->text[i]);
    free(c->text);
    free(c->m);
}

/* median CPU seconds a render over reps batches of batch renders; *out
 * the last text (the caller frees it) */
static double time_render(const sb_rt_chat_tmpl *t, const conv *c, int reps, int batch,
                          sb_rt_chat_text *out, int *rc)
{
    double *s = malloc((size_t)reps * sizeof *s);
    sb_rt_err err;
    *rc = 0;
    for (int r = 0; r < reps && !*rc; r++) {
        double t0 = cpu_s();
        for (int b = 0; b < batch && !*rc; b++) {
            sb_rt_chat_text x;
            *rc = sb_rt_chat_render(t, c->m, c->n, true, &x, &err);
            if (*rc)
                break;
            if (r == reps - 1 && b == batch - 1)
                *out = x;
            else
                sb_rt_chat_text_free(&x);
        }
        s[r] = (cpu_s() - t0) / batch;
    }
    qsort(s, (size_t)reps, sizeof *s, cmp_d);
    double med = *rc ? 0 : s[reps / 2];
    free(s);
    return med;
}

int main(int argc, char **argv)
{
    const char *dir = SB_BENCH_TEMPLATES;
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--templates") && i + 1 < argc)
            dir = argv[++i];
        else {
            fprintf(stderr, "usage: bench_chat_tmpl [--quick] [--templates DIR]\n");
            return 2;
        }
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "bench_chat_tmpl: %s: cannot open\n", dir);
        return 1;
    }
    char *names[64];
    size_t n_names = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n_names < 64) {
        size_t l = strlen(e->d_name);
        if (l > 6 && !strcmp(e->d_name + l - 6, ".jinja") && strncmp(e->d_name, "jinja-", 6))
            names[n_names++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n_names, sizeof *names, cmp_name);
    int reps = quick ? 3 : 11, batch[2] = { quick ? 5 : 200, quick ? 1 : 10 };
    conv convs[2] = { make_conv(8, 200), make_conv(64, 2048) };
    printf("chat templates: CPU time per render (median of %d batches of %d and %d), family "
           "renderer / interpreter (jj)\n", reps, batch[0], batch[1]);
    printf("%-42s %-12s %10s %10s %10s %10s %10s\n", "template", "variant", "read_ms",
           "chat_us", "chat_jj_us", "agent_us", "agent_jj_us");
    int bad = 0;
    for (size_t k = 0; k < n_names; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        char *src = slurp(path);
        if (!src) {
            fprintf(stderr, "bench_chat_tmpl: %s: cannot read\n", path);
            return 1;
        }
        sb_rt_chat_tmpl *t[2];
        sb_rt_err err;
        double t0 = cpu_s();
        int rc = sb_rt_chat_tmpl_new(src, NULL, "<s>", "</s>", &t[0], &err);
        double read_s = cpu_s() - t0;
        if (rc || sb_rt_chat_tmpl_new(src, "jinja", "<s>", "</s>", &t[1], &err)) {
            fprintf(stderr, "bench_chat_tmpl: %s: %s\n", names[k], err.msg);
            return 1;
        }
        double us[2][2];
        for (int ci = 0; ci < 2; ci++) {
            sb_rt_chat_text x[2] = { { 0 }, { 0 } };
            int rcs[2];
            /* templates without a system role (Gemma, Mistral v0.1) get the
             * conversation without its system message */
            conv nosys = { .m = convs[ci].m + 1, .n = convs[ci].n - 1,
                           .text = convs[ci].text + 1 };
            const conv *cv = &convs[ci];
            for (int w = 0; w < 2; w++) {
                us[ci][w] = time_render(t[w], cv, reps, batch[ci], &x[w], &rcs[w]) * 1e6;
                if (rcs[w] && w == 0 && cv == &convs[ci]) {
                    cv = &nosys;
                    w = -1;
                }
            }
            if (rcs[0] || rcs[1]) {
                bad = 1;
            } else {
                if (x[0].len != x[1].len || memcmp(x[0].text, x[1].text, x[0].len))
                    bad = 1;
                for (size_t i = cv == &nosys ? 0 : 1; i < cv->n; i++) /* phi3-mini drops system */
                    if (!strstr(x[0].text, cv->text[i]))
                        bad = 1;
            }
            sb_rt_chat_text_free(&x[0]);
            sb_rt_chat_text_free(&x[1]);
        }
        printf("%-42.42s %-12s %10.2f %10.1f %10.1f %10.1f %10.1f\n", names[k],
               sb_rt_chat_tmpl_variant(t[0]), read_s * 1e3, us[0][0], us[0][1], us[1][0],
               us[1][1]);
        if (bad) {
            fprintf(stderr, "bench_chat_tmpl: %s: a render lost content or the renderers "
                    "disagree\n", names[k]);
            return 1;
        }
        sb_rt_chat_tmpl_free(t[0]);
        sb_rt_chat_tmpl_free(t[1]);
        free(src);
        free(names[k]);
    }
    free_conv(&convs[0]);
    free_conv(&convs[1]);
    return 0;
}
