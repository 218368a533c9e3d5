/* tokenize.c -- `snapbank tokenize MODEL (--prompt TEXT | --file F)
 * [--ids-only] [--no-bos] [--no-special]`: the token ids of a text by the
 * vocabulary of a GGUF file (a model, or a vocabulary-only file), as
 * llama.cpp's llama-tokenize prints them. Exit status: 0 printed,
 * 1 failure (the file, its vocabulary, the text), 2 usage error. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "text/tokenizer.h"
#include "text/vocab.h"

static void tok_usage(FILE *f)
{
    fprintf(f,
            "usage: snapbank tokenize MODEL (--prompt TEXT | --file F) [--ids-only]\n"
            "                         [--no-bos] [--no-special]\n\n"
            "Prints the tokens of TEXT (or of file F's bytes, unchanged) by the vocabulary\n"
            "of the GGUF file MODEL: a model, or a vocabulary-only file. Both vocabulary\n"
            "kinds run: llama (SentencePiece) and gpt2 (byte-level BPE, with the\n"
            "pre-tokenizers llama-bpe, qwen2, qwen35, gpt-2, smollm and their aliases).\n"
            "By default, like llama-tokenize: BOS (and EOS) as the vocabulary asks,\n"
            "special-token texts (<|im_start|>, <s>, ...) become those tokens, and one\n"
            "line per token: its id and its text ('id -> 'piece'').\n"
            "TEXT is taken as it is (no escape sequences: use the shell's $'a\\nb').\n\n"
            "options:\n"
            "  --prompt TEXT   the text\n"
            "  --file F        the text is F's bytes\n"
            "  --ids-only      print the ids alone on one line, separated by spaces\n"
            "  --no-bos        add no BOS or EOS token\n"
            "  --no-special    control-token texts are plain text (user-defined tokens,\n"
            "                  such as MPT's runs of spaces, still match: as\n"
            "                  llama-tokenize --no-parse-special)\n\n"
            "exit status: 0 printed, 1 failure, 2 usage.\n");
}

/* The bytes of path (any bytes, NUL included) into *out, *len. Returns 0,
 * or 1 (printed). */
static int read_all(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "snapbank tokenize: %s: cannot open: %s\n", path, strerror(errno));
        return 1;
    }
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    while (b) {
        n += fread(b + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *nb = cap < SIZE_MAX / 2 ? realloc(b, cap *= 2) : NULL;
        if (!nb)
            free(b);
        b = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (!b || bad) {
        fprintf(stderr, "snapbank tokenize: %s: cannot read%s\n", path,
                b ? "" : ": out of memory");
        free(b);
        return 1;
    }
    *out = b, *len = n;
    return 0;
}

int sb_cli_tokenize(int argc, char **argv)
{
    const char *model = NULL, *prompt = NULL, *file = NULL;
    int ids_only = 0, no_bos = 0, no_special = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            tok_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--prompt") && v && !prompt) {
            prompt = v, i++;
        } else if (!strcmp(a, "--file") && v && !file) {
            file = v, i++;
        } else if (!strcmp(a, "--ids-only")) {
            ids_only = 1;
        } else if (!strcmp(a, "--no-bos")) {
            no_bos = 1;
        } else if (!strcmp(a, "--no-special")) {
            no_special = 1;
        } else if (a[0] != '-' && !model) {
            model = a;
        } else {
            fprintf(stderr, "snapbank tokenize: bad argument '%s'\n\n", a);
            tok_usage(stderr);
            return 2;
        }
    }
    if (!model || !prompt == !file) {
        fprintf(stderr, "snapbank tokenize: need MODEL and one of --prompt, --file\n\n");
        tok_usage(stderr);
        return 2;
    }
    char *text = NULL;
    size_t len = 0;
    if (file && read_all(file, &text, &len))
        return 1;
    sb_rt_err err = { 0 };
    sb_rt_tok *t = NULL;
    if (sb_rt_tok_load(model, &t, &err) != SB_OK) {
        fprintf(stderr, "snapbank tokenize: %s\n", err.msg);
        free(text);
        return 1;
    }
    const char *src = file ? text : prompt;
    len = file ? len : strlen(prompt);
    sb_rt_tok_info info;
    sb_rt_tok_get_info(t, &info);
    unsigned flags = (no_special ? 0 : SB_RT_TOK_PARSE_SPECIAL) |
                     (!no_bos && info.add_bos ? SB_RT_TOK_ADD_BOS : 0) |
                     (!no_bos && info.add_eos ? SB_RT_TOK_ADD_EOS : 0);
    size_t n = 0;
    int rc = sb_rt_tok_encode(t, src, len, flags, NULL, 0, &n);
    uint32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if ((rc != SB_OK && rc != SB_ERR_RANGE) || !ids ||
        sb_rt_tok_encode(t, src, len, flags, ids, n, &n) != SB_OK) {
        fprintf(stderr, "snapbank tokenize: %s: the text could not be tokenized (%s)\n", model,
                sb_strerror(rc != SB_OK && rc != SB_ERR_RANGE ? rc : SB_ERR_NOMEM));
        free(ids), free(text);
        sb_rt_tok_free(t);
        return 1;
    }
    char piece[8192];
    for (size_t i = 0; i < n; i++) {
        if (ids_only) {
            printf(i ? " %" PRIu32 : "%" PRIu32, ids[i]);
            continue;
        }
        size_t k = 0;
        sb_rt_tok_piece_ex(t, ids[i], SB_RT_TOK_NONE, SB_RT_TOK_SHOW_SPECIAL |
                           SB_RT_TOK_KEEP_SPACE, piece, sizeof piece, &k);
        printf("%6" PRIu32 " -> '", ids[i]);
        fwrite(piece, 1, k < sizeof piece ? k : sizeof piece, stdout);
        printf("'\n");
    }
    if (ids_only)
        printf("\n");
    free(ids), free(text);
    sb_rt_tok_free(t);
    return fflush(stdout) == 0 ? 0 : 1;
}
