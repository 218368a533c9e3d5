/* make_model.c -- `snapbank make-model -o FILE [options]`: write a
 * llama-family GGUF model with random weights (tools/make_model/make_model.h).
 * Exit status: 0 written, 1 failure, 2 usage error. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "make_model/make_model.h"
#include "text/vocab.h"

static void mm_usage(FILE *f)
{
    fprintf(f,
            "usage: snapbank make-model -o FILE [--preset P] [options]\n\n"
            "Writes a GGUF v3 model (llama, qwen2, qwen3, the hybrid qwen35, or olmo2 with\n"
            "sliding-window attention, for llama.cpp only: `run` refuses olmo2) with random\n"
            "weights drawn from a seed (the same options give the same bytes) and a\n"
            "generated SentencePiece vocabulary, or a real one (--vocab FILE).\n\n"
            "options:\n"
            "  -o FILE            the file to write\n"
            "  --preset P         tiny (default: llama, dim 64, 2 layers, F32), small\n"
            "                     (llama, dim 768, 12 layers, 12/4 heads, ff 2048, vocab\n"
            "                     4096, F16); test miniatures tiny-llama3 (rope_freqs),\n"
            "                     tiny-qwen2, tiny-qwen3 (tied, F32); the real shapes\n"
            "                     llama3-1b (Llama-3.2-1B), qwen2.5-0.5b, qwen3-0.6b,\n"
            "                     smollm2-360m (tied, F16, real vocabulary sizes);\n"
            "                     hybrid Gated DeltaNet + gated attention (qwen35):\n"
            "                     tiny-hybrid (dim 64, 4 layers, F32), small-hybrid\n"
            "                     (dim 768, 12 layers, 1 in 4 attention, F16),\n"
            "                     qwen3.5-0.8b (the real shape); sliding window (olmo2,\n"
            "                     llama.cpp only): tiny-swa (dim 64, 4 layers, 4/2 heads\n"
            "                     of 16, window 32, untied, F32)\n"
            "  --arch A           llama, qwen2 (Q/K/V biases), qwen3 (q/k norms), qwen35,\n"
            "                     olmo2 (untied, head size dim / heads)\n"
            "  --swa N            olmo2's sliding window: olmo2.attention.sliding_window\n"
            "                     = N positions; layers 0-2 of every 4 slide (llama.cpp's\n"
            "                     default pattern), every 4th attends to all; 0: no\n"
            "                     window written (every layer full); other archs: 0 only\n"
            "  --dtype T          matrices and embeddings: f32, f16, bf16, q4_0, q4_1,\n"
            "                     q5_0, q5_1, q8_0, q4_k, q5_k, q6_k (every matrix that\n"
            "                     type), or q4_k_m, q5_k_m (llama.cpp's per-tensor mixes)\n"
            "  --seed N           weights seed (default 1)\n"
            "  --dim N --layers N --heads N --kv-heads N --head-dim N --ff N\n"
            "  --vocab N --ctx N  override the preset's shape (head-dim 0: dim / heads)\n"
            "  --vocab FILE       take the vocabulary from a GGUF file (a model or a\n"
            "                     vocabulary-only file: every tokenizer.* key, merges,\n"
            "                     token types, special ids, pre, chat template); the\n"
            "                     vocabulary size follows it\n"
            "  --tied, --untied   no output matrix (the output shares token_embd), or one\n"
            "  --rope-base X --rms-eps X\n"
            "                     rope.freq_base, attention.layer_norm_rms_epsilon\n"
            "  --rope-freqs F     write rope_freqs.weight: Llama 3.1 divisors, factor F\n"
            "                     (0: none; llama only)\n"
            "  --rope-orig-ctx N  their original context (8192), and YaRN's\n"
            "  --rope-scaling T --rope-scale S\n"
            "                     rope.scaling.type none|linear|yarn and its factor\n"
            "  --answer TEXT      a test fixture: the greedy answer (temperature 0) to any\n"
            "                     ChatML chat prompt is TEXT (1 to 255 bytes), then\n"
            "                     <|im_end|> (the end of generation), then </s>, on both\n"
            "                     engines. TEXT is one user-defined token, the last of the\n"
            "                     vocabulary after <|im_start|> and <|im_end|>; every block\n"
            "                     adds nothing (attn_output and ffn_down zero) and\n"
            "                     output.weight maps \"\\n\" -> TEXT -> <|im_end|> -> </s>\n"
            "                     with a lead of 10 logits. llama only, f32 or f16, untied,\n"
            "                     generated vocabulary\n\n"
            "exit status: 0 written, 1 failure, 2 usage.\n");
}

int sb_cli_make_model(int argc, char **argv)
{
    const char *out = NULL, *preset = "tiny";
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--preset") && i + 1 < argc)
            preset = argv[++i];
    sb_rt_make_opts o;
    if (sb_rt_make_opts_preset(&o, preset) != 0) {
        fprintf(stderr, "snapbank make-model: unknown preset '%s' (%s)\n", preset,
                SB_RT_MAKE_PRESETS);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            mm_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--preset") && v) {
            i++;
        } else if (!strcmp(a, "-o") && v) {
            out = v, i++;
        } else if (!strcmp(a, "--tied") || !strcmp(a, "--untied")) {
            o.tied = !strcmp(a, "--tied");
        } else if (!strncmp(a, "--", 2) && v && sb_rt_make_opts_set(&o, a + 2, v) == 0) {
            i++;
        } else {
            fprintf(stderr, "snapbank make-model: bad argument '%s'%s%s\n\n", a,
                    v ? " " : "", v && a[0] == '-' ? v : "");
            mm_usage(stderr);
            return 2;
        }
    }
    if (!out) {
        mm_usage(stderr);
        return 2;
    }
    sb_rt_err err = { 0 };
    sb_rt_tok *vt = NULL;
    if (o.vocab[0]) { /* the vocabulary size it gives, for the report below */
        if (sb_rt_tok_load(o.vocab, &vt, &err) != 0) {
            fprintf(stderr, "snapbank make-model: --vocab: %s\n", err.msg);
            return 1;
        }
        o.n_vocab = sb_rt_tok_n_vocab(vt);
        sb_rt_tok_free(vt);
    }
    int rc = sb_rt_make_model(&o, out, &err);
    if (rc != 0) {
        fprintf(stderr, "snapbank make-model: %s\n", err.msg);
        return rc == -1 ? 2 : 1; /* SB_ERR_INVAL: a bad shape is a usage error */
    }
    struct stat st;
    char win[32] = "";
    if (o.n_swa)
        snprintf(win, sizeof win, ", window %u", o.n_swa);
    printf("wrote %s (%s, %s, %u layers, dim %u, %u/%u heads of %u, ff %u, vocab %u, ctx %u%s, "
           "%s, seed %llu): %lld bytes\n", out, o.arch, sb_rt_make_dtype_name(o.dtype),
           o.n_layers, o.dim, o.n_heads, o.n_kv_heads, o.head_dim ? o.head_dim : o.dim / o.n_heads,
           o.n_ff, o.n_vocab, o.n_ctx, win, o.tied ? "tied" : "untied", (unsigned long long)o.seed,
           stat(out, &st) == 0 ? (long long)st.st_size : -1LL);
    return 0;
}
