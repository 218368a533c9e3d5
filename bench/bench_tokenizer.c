/* bench_tokenizer.c -- how fast the tokenizers load a vocabulary and
 * encode a long prompt.
 *
 * usage: bench_tokenizer [--quick] [--text-out FILE] [VOCAB.gguf ...]
 *
 * For each vocabulary (default: the five of tests/data/vocab): the load
 * time, then the encoding of a prompt of about 100,000 tokens (prose,
 * code, numbers, a few scripts and emoji, each paragraph followed by a
 * different number), its decoding, and the encoding of
 * one 200 kB word (a single run of letters: the worst case for per-word
 * merging). Times are CPU seconds of the process (getrusage), which the
 * machine's load does not change much, beside wall seconds; an encoding is
 * repeated until it has taken 0.5 s and the mean is printed. Every encoding
 * is decoded and compared with the text (exit 1 on a difference).
 * --quick: a tenth of the text (the smoke test). --text-out writes the
 * prompt, to time another tokenizer on the same bytes.
 */
#define BENCH_NAME "bench_tokenizer"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_util.h"
#include "text/tokenizer.h"
#include "text/vocab.h"

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static const char *const paras[] = {
    "The bank keeps what a model has already read, so that the next question does not start "
    "from nothing. When the same words come back, it finds the longest prefix it has seen and "
    "hands the state back, page by page. It's fast; they'll see it's what they'd want.\n\n",
    "int main(int argc, char **argv)\n{\n    for (int i = 0; i < argc; i++) {\n        "
    "printf(\"%d: %s\\n\", i, argv[i]);\n    }\n    return 0;\n}\n\n",
    "Invoice 2024-1187: 3 items x 19.99 EUR = 59.97 EUR; total 1,234,567.89 (ref.",
    "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xef\xbc\x81 "
    "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82, \xd0\xbc\xd0\xb8\xd1\x80! "
    "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 \xd8\xa8\xd8\xa7\xd9\x84\xd8\xb9\xd8\xa7\xd9\x84"
    "\xd9\x85 \xf0\x9f\x98\x80\xf0\x9f\x91\x8b caf\xc3\xa9 na\xc3\xafve "
    "\xe3\x81\x93\xe3\x82\x93\xe3\x81\xab\xe3\x81\xa1\xe3\x81\xaf",
    "    def step(self, x):\n        return self.w @ x + self.b  #",
};

/* About n_bytes of prompt into a malloc'd buffer. */
static char *prompt(size_t n_bytes, size_t *len)
{
    char *p = malloc(n_bytes + 512);
    if (!p)
        exit(1);
    size_t k = 0;
    for (unsigned i = 0; k < n_bytes; i++) {
        const char *f = paras[mix(i) % (sizeof paras / sizeof *paras)];
        k += (size_t)snprintf(p + k, 512, "%s %u\n", f, i * 7919u % 1000000u);
    }
    *len = k;
    return p;
}

/* Encode and decode text; print a line; exit 1 when decode differs. */
static void run(const char *name, const sb_rt_tok *t, const char *what, const char *text,
                size_t len)
{
    size_t need = 0, n, back_len;
    double c0 = cpu_s(), w0 = now_s();
    int rc = sb_rt_tok_encode(t, text, len, 0, NULL, 0, &need);
    if (rc != SB_OK && rc != SB_ERR_RANGE)
        check(rc, "encode");
    double c_count = cpu_s() - c0;
    uint32_t *ids = malloc((need ? need : 1) * sizeof *ids);
    char *back = malloc(len + 1);
    if (!ids || !back)
        exit(1);
    /* repeat until 0.5 s of CPU: the process clock ticks in milliseconds */
    int reps = 0;
    c0 = cpu_s(), w0 = now_s();
    do {
        check(sb_rt_tok_encode(t, text, len, 0, ids, need, &n), "encode");
        reps++;
    } while (cpu_s() - c0 < 0.5);
    double c_enc = (cpu_s() - c0) / reps, w_enc = (now_s() - w0) / reps;
    c0 = cpu_s();
    check(sb_rt_tok_decode(t, ids, n, back, len + 1, &back_len), "decode");
    double c_dec = cpu_s() - c0;
    if (back_len != len || memcmp(back, text, len)) {
        fprintf(stderr, BENCH_NAME ": %s: %s does not decode back\n", name, what);
        exit(1);
    }
    printf("  %-8s %7zu bytes %7zu tokens: encode %7.4f s cpu (%7.4f wall; mean of %d), "
           "%6.1f MB/s, %9.0f tok/s; counting pass %7.4f s; decode %6.4f s\n", what, len, n,
           c_enc, w_enc, reps, (double)len / 1e6 / c_enc, (double)n / c_enc, c_count, c_dec);
    free(ids), free(back);
}

int main(int argc, char **argv)
{
    bool quick = false;
    const char *text_out = NULL, *files[16];
    int n_files = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--text-out") && i + 1 < argc)
            text_out = argv[++i];
        else if (argv[i][0] != '-' && n_files < 16)
            files[n_files++] = argv[i];
        else {
            fprintf(stderr, "usage: bench_tokenizer [--quick] [--text-out FILE] "
                            "[VOCAB.gguf ...]\n");
            return 2;
        }
    }
    static char defaults[5][1024];
    static const char *const names[5] = { "llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2" };
    if (!n_files)
        for (int i = 0; i < 5; i++) {
            snprintf(defaults[i], sizeof defaults[i], "%s/ggml-vocab-%s.gguf",
                     SB_BENCH_VOCAB_DIR, names[i]);
            files[n_files++] = defaults[i];
        }
    size_t len;
    char *text = prompt(quick ? 40000 : 400000, &len);
    if (text_out) {
        FILE *f = fopen(text_out, "wb");
        if (!f || fwrite(text, 1, len, f) != len || fclose(f)) {
            fprintf(stderr, BENCH_NAME ": %s: cannot write\n", text_out);
            return 1;
        }
    }
    size_t word_len = quick ? 20000 : 200000;
    char *word = malloc(word_len);
    if (!word)
        return 1;
    for (size_t i = 0; i < word_len; i++)
        word[i] = "abcdefghij"[mix(i) % 10];
    printf("bench_tokenizer: %s build; prompt %zu bytes; CPU seconds of this process\n",
           SB_BENCH_BUILD_TYPE, len);
    for (int f = 0; f < n_files; f++) {
        sb_rt_tok *t;
        sb_rt_err err = { 0 };
        double c0 = cpu_s(), w0 = now_s();
        if (sb_rt_tok_load(files[f], &t, &err) != SB_OK) {
            fprintf(stderr, BENCH_NAME ": %s\n", err.msg);
            return 1;
        }
        sb_rt_tok_info in;
        sb_rt_tok_get_info(t, &in);
        printf("%s (%s/%s, %u tokens): load %.3f s cpu (%.3f wall)\n", files[f], in.model,
               in.pre, in.n_vocab, cpu_s() - c0, now_s() - w0);
        run(files[f], t, "prompt", text, len);
        run(files[f], t, "one word", word, word_len);
        sb_rt_tok_free(t);
    }
    free(text), free(word);
    return 0;
}
