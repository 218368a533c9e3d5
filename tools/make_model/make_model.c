/* make_model.c -- random llama-family GGUF models (make_model.h). */
#include "make_model/make_model.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "template/chat_tmpl.h"
#include "text/tokenizer.h"
#include "text/vocab.h"
#include "snapbank.h"

/* The text the vocabulary is learned from (our own prose). */
static const char corpus[] =
    "The bank keeps what a model has already read, so that the next question does not "
    "start from nothing. A prompt is a sequence of tokens, and the state a model builds "
    "for it grows with every token it reads. When the same words come back, in the next "
    "turn of a conversation or after a restart, the bank finds the longest prefix it has "
    "seen and hands the state back, page by page, and the model goes on from there. "
    "Pages that are used often stay in memory; the others are written to the disk in a "
    "log, with a checksum on every record, and read again when they are needed. Nothing "
    "wrong is ever returned: a page that fails its check is dropped with everything that "
    "depends on it, and the model simply computes that part again. The writer keeps to a "
    "budget of bytes per hour, because flash memory wears out when it is written too "
    "much, and it gives way to the model whenever the model is busy answering. "
    "Engineers who run these systems want three things: that the answer comes quickly, "
    "that the machine keeps working for years, and that they can see what it is doing. "
    "So every turn reports where its state came from, how many tokens were saved, and "
    "how long the first token took to arrive. The numbers are printed, measured on the "
    "machine at hand, and compared side by side with the tools people already trust. "
    "A small model with random weights cannot say anything wise, but it computes "
    "exactly what a real one computes, with the same shapes and the same arithmetic, and "
    "that is enough to measure speed and to prove that a restored state gives the very "
    "same numbers as one computed from the start. Over many turns and many sessions that "
    "share a long system prompt, the savings add up to hours of work that never has to "
    "be done again, and to answers that begin before the reader has finished blinking.";

#define N_SPECIAL 3u
#define N_BYTE 256u
#define MAX_PIECE 64u

/* The real shapes, from the published configurations (config.json):
 *   Llama-3.2-1B  meta-llama/Llama-3.2-1B-Instruct config.json, as quoted
 *     in kevinstephano/thunder_model_blocks hf_llama/llama_config.py:
 *     hidden_size 2048, intermediate_size 8192, num_hidden_layers 16,
 *     num_attention_heads 32, num_key_value_heads 8, head_dim 64,
 *     max_position_embeddings 131072, rms_norm_eps 1e-05, rope_theta
 *     500000, rope_scaling llama3 (factor 32, low_freq_factor 1,
 *     high_freq_factor 4, original_max_position_embeddings 8192),
 *     tie_word_embeddings true, vocab_size 128256.
 *   Qwen2.5-0.5B  Qwen/Qwen2.5-0.5B config.json: hidden_size 896,
 *     intermediate_size 4864, 24 layers, 14 heads, 2 KV heads,
 *     max_position_embeddings 32768, rms_norm_eps 1e-06, rope_theta 1e6,
 *     tie_word_embeddings true, vocab_size 151936; the model card: "RoPE,
 *     SwiGLU, RMSNorm, Attention QKV bias and tied word embeddings".
 *   Qwen3-0.6B  Qwen/Qwen3-0.6B config.json: hidden_size 1024,
 *     intermediate_size 3072, 28 layers, 16 heads, 8 KV heads, head_dim
 *     128, max_position_embeddings 40960, rms_norm_eps 1e-06, rope_theta
 *     1e6, attention_bias false, tie_word_embeddings true, vocab_size
 *     151936; the card: "qk layernorm for all models".
 *   SmolLM2-360M  HuggingFaceTB/SmolLM2-360M(-Instruct): LlamaForCausalLM,
 *     hidden 960, intermediate 2560, 32 layers, 15 heads, 5 KV heads
 *     (head 64), max_position_embeddings 8192, rms_norm_eps 1e-05,
 *     rope_theta 100000, tied, vocab 49152.
 *   Qwen3.5-0.8B  Qwen/Qwen3.5-0.8B config.json text_config: hidden_size
 *     1024, intermediate_size 3584, 24 layers, full_attention_interval 4,
 *     8 heads, 2 KV heads, head_dim 256, attn_output_gate true,
 *     linear_num_key_heads 16, linear_num_value_heads 16,
 *     linear_key_head_dim 128, linear_value_head_dim 128,
 *     linear_conv_kernel_dim 4, rms_norm_eps 1e-06, rope_theta 1e7,
 *     partial_rotary_factor 0.25, mrope_section [11, 11, 10],
 *     max_position_embeddings 262144, tied, vocab 248320, one MTP layer
 *     (as quoted in public test fixtures of Qwen3.5 loaders). */
static const struct preset {
    const char *name;
    const char *arch;
    uint32_t dtype, dim, n_layers, n_heads, n_kv_heads, head_dim, n_ff, n_vocab, n_ctx;
    bool tied;
    float rope_base, rms_eps, rope_freqs;
} presets[] = {
    { "tiny", "llama", SB_RT_F32, 64, 2, 4, 2, 0, 192, 512, 2048, false, 1e4f, 1e-5f, 0 },
    { "small", "llama", SB_RT_F16, 768, 12, 12, 4, 0, 2048, 4096, 8192, false, 1e4f, 1e-5f, 0 },
    { "tiny-llama3", "llama", SB_RT_F32, 64, 2, 4, 2, 0, 192, 512, 2048, true, 5e5f, 1e-5f, 32 },
    { "tiny-qwen2", "qwen2", SB_RT_F32, 64, 2, 4, 2, 0, 192, 512, 2048, true, 1e6f, 1e-6f, 0 },
    { "tiny-qwen3", "qwen3", SB_RT_F32, 64, 2, 4, 2, 32, 192, 512, 2048, true, 1e6f, 1e-6f, 0 },
    { "llama3-1b", "llama", SB_RT_F16, 2048, 16, 32, 8, 64, 8192, 128256, 131072, true, 5e5f,
      1e-5f, 32 },
    { "qwen2.5-0.5b", "qwen2", SB_RT_F16, 896, 24, 14, 2, 0, 4864, 151936, 32768, true, 1e6f,
      1e-6f, 0 },
    { "qwen3-0.6b", "qwen3", SB_RT_F16, 1024, 28, 16, 8, 128, 3072, 151936, 40960, true, 1e6f,
      1e-6f, 0 },
    { "smollm2-360m", "llama", SB_RT_F16, 960, 32, 15, 5, 0, 2560, 49152, 8192, true, 1e5f,
      1e-5f, 0 },
    { "tiny-hybrid", "qwen35", SB_RT_F32, 64, 4, 4, 2, 32, 192, 512, 2048, true, 1e7f, 1e-6f,
      0 },
    { "small-hybrid", "qwen35", SB_RT_F16, 768, 12, 8, 2, 128, 2048, 4096, 8192, false, 1e7f,
      1e-6f, 0 },
    { "qwen3.5-0.8b", "qwen35", SB_RT_F16, 1024, 24, 8, 2, 256, 3584, 248320, 262144, true,
      1e7f, 1e-6f, 0 },
    { "tiny-swa", "olmo2", SB_RT_F32, 64, 4, 4, 2, 0, 192, 512, 2048, false, 1e4f, 1e-6f, 0 },
};

/* The qwen35 presets' hybrid shape: rope dims, attention interval, conv
 * width, DeltaNet key and value heads and head size. */
static const struct hybrid_preset {
    const char *name;
    uint32_t n_rot, attn_interval, ssm_conv, ssm_k_heads, ssm_v_heads, ssm_head_dim;
} hybrid_presets[] = {
    { "tiny-hybrid", 16, 2, 4, 2, 4, 16 },
    { "small-hybrid", 32, 4, 4, 6, 12, 128 },
    { "qwen3.5-0.8b", 64, 4, 4, 16, 16, 128 },
};

/* The olmo2 presets' sliding window (attention.sliding_window). */
static const struct swa_preset {
    const char *name;
    uint32_t n_swa;
} swa_presets[] = {
    { "tiny-swa", 32 },
};

int sb_rt_make_opts_preset(sb_rt_make_opts *o, const char *preset)
{
    size_t i = 0, n = sizeof presets / sizeof *presets;
    while (i < n && !(preset && !strcmp(preset, presets[i].name)))
        i++;
    const struct preset *p = &presets[i < n ? i : 0];
    memset(o, 0, sizeof *o);
    snprintf(o->arch, sizeof o->arch, "%s", p->arch);
    o->seed = 1;
    o->dtype = p->dtype;
    o->dim = p->dim, o->n_layers = p->n_layers, o->n_heads = p->n_heads;
    o->n_kv_heads = p->n_kv_heads, o->head_dim = p->head_dim, o->n_ff = p->n_ff;
    o->n_vocab = p->n_vocab, o->n_ctx = p->n_ctx, o->tied = p->tied;
    o->rope_base = p->rope_base, o->rms_eps = p->rms_eps, o->rope_freqs = p->rope_freqs;
    o->rope_orig_ctx = 8192;
    o->rope_scale = 1;
    for (size_t h = 0; h < sizeof hybrid_presets / sizeof *hybrid_presets; h++) {
        const struct hybrid_preset *q = &hybrid_presets[h];
        if (strcmp(q->name, p->name))
            continue;
        o->n_rot = q->n_rot, o->attn_interval = q->attn_interval, o->ssm_conv = q->ssm_conv;
        o->ssm_k_heads = q->ssm_k_heads, o->ssm_v_heads = q->ssm_v_heads;
        o->ssm_head_dim = q->ssm_head_dim;
    }
    for (size_t h = 0; h < sizeof swa_presets / sizeof *swa_presets; h++)
        if (!strcmp(swa_presets[h].name, p->name))
            o->n_swa = swa_presets[h].n_swa;
    return i < n ? SB_OK : SB_ERR_INVAL;
}

/* --dtype names, their ids and llama.cpp's general.file_type (its
 * llama_ftype: what llama.cpp prints for the file). */
static const struct { const char *name; uint32_t id, ftype; } dtypes[] = {
    { "f32", SB_RT_F32, 0 },        { "f16", SB_RT_F16, 1 },       { "bf16", SB_RT_BF16, 32 },
    { "q4_0", SB_RT_Q4_0, 2 },      { "q4_1", SB_RT_Q4_1, 3 },     { "q5_0", SB_RT_Q5_0, 8 },
    { "q5_1", SB_RT_Q5_1, 9 },      { "q8_0", SB_RT_Q8_0, 7 },     { "q4_k", SB_RT_Q4_K, 14 },
    { "q5_k", SB_RT_Q5_K, 16 },     { "q6_k", SB_RT_Q6_K, 18 },
    { "q4_k_m", SB_RT_MAKE_Q4_K_M, 15 }, { "q5_k_m", SB_RT_MAKE_Q5_K_M, 17 },
};

const char *sb_rt_make_dtype_name(uint32_t dtype)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof *dtypes; i++)
        if (dtypes[i].id == dtype)
            return dtypes[i].name;
    return NULL;
}

static int num(const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    if (!v || !*v || *v == '-')
        return SB_ERR_INVAL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || x < lo || x > hi)
        return SB_ERR_INVAL;
    *out = x;
    return SB_OK;
}

static int fnum(const char *v, double lo, double hi, float *out)
{
    char *end;
    if (!v || !*v)
        return SB_ERR_INVAL;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || !(x >= lo && x <= hi))
        return SB_ERR_INVAL;
    *out = (float)x;
    return SB_OK;
}

int sb_rt_make_opts_set(sb_rt_make_opts *o, const char *name, const char *v)
{
    uint64_t x = 0;
    if (!o || !name || !v)
        return SB_ERR_INVAL;
    if (!strcmp(name, "arch")) {
        if (strcmp(v, "llama") && strcmp(v, "qwen2") && strcmp(v, "qwen3") &&
            strcmp(v, "qwen35") && strcmp(v, "olmo2"))
            return SB_ERR_INVAL;
        snprintf(o->arch, sizeof o->arch, "%s", v);
        if (!strcmp(v, "qwen35") && !o->ssm_head_dim) { /* from another arch's preset */
            o->attn_interval = 4, o->ssm_conv = 4, o->ssm_k_heads = 2, o->ssm_v_heads = 4;
            o->ssm_head_dim = 16;
        }
        return SB_OK;
    }
    if (!strcmp(name, "dtype")) {
        for (size_t i = 0; i < sizeof dtypes / sizeof *dtypes; i++)
            if (!strcmp(v, dtypes[i].name)) {
                o->dtype = dtypes[i].id;
                return SB_OK;
            }
        return SB_ERR_INVAL;
    }
    if (!strcmp(name, "answer")) {
        o->answer = v; /* borrowed (make_model.h) */
        return SB_OK;
    }
    if (!strcmp(name, "rope-scaling")) {
        if (*v && strcmp(v, "none") && strcmp(v, "linear") && strcmp(v, "yarn"))
            return SB_ERR_INVAL;
        snprintf(o->rope_scaling, sizeof o->rope_scaling, "%s", v);
        return SB_OK;
    }
    if (!strcmp(name, "vocab")) {
        if (v[0] && strspn(v, "0123456789") != strlen(v)) { /* a file */
            if (strlen(v) >= sizeof o->vocab)
                return SB_ERR_INVAL;
            snprintf(o->vocab, sizeof o->vocab, "%s", v);
            return SB_OK;
        }
        o->vocab[0] = '\0'; /* a number: the generated vocabulary's size */
    }
    static const struct { const char *name; size_t off; double lo, hi; } ff[] = {
        { "rope-base", offsetof(sb_rt_make_opts, rope_base), 1.001, 1e12 },
        { "rms-eps", offsetof(sb_rt_make_opts, rms_eps), 1e-12, 1 },
        { "rope-freqs", offsetof(sb_rt_make_opts, rope_freqs), 0, 1e6 },
        { "rope-scale", offsetof(sb_rt_make_opts, rope_scale), 1e-3, 1e6 },
    };
    for (size_t i = 0; i < sizeof ff / sizeof *ff; i++)
        if (!strcmp(name, ff[i].name)) {
            float f;
            if (fnum(v, ff[i].lo, ff[i].hi, &f) != SB_OK)
                return SB_ERR_INVAL;
            memcpy((char *)o + ff[i].off, &f, sizeof f);
            return SB_OK;
        }
    static const struct { const char *name; size_t off; uint64_t lo, hi; } f[] = {
        { "dim", offsetof(sb_rt_make_opts, dim), 1, 1u << 16 },
        { "layers", offsetof(sb_rt_make_opts, n_layers), 1, 512 },
        { "heads", offsetof(sb_rt_make_opts, n_heads), 1, 1024 },
        { "kv-heads", offsetof(sb_rt_make_opts, n_kv_heads), 1, 1024 },
        { "head-dim", offsetof(sb_rt_make_opts, head_dim), 0, 4096 },
        { "ff", offsetof(sb_rt_make_opts, n_ff), 1, 1u << 20 },
        { "vocab", offsetof(sb_rt_make_opts, n_vocab), 1, 1u << 20 },
        { "ctx", offsetof(sb_rt_make_opts, n_ctx), 1, 1u << 22 },
        { "rope-orig-ctx", offsetof(sb_rt_make_opts, rope_orig_ctx), 1, 1u << 24 },
        { "rope-dim", offsetof(sb_rt_make_opts, n_rot), 0, 4096 },
        { "attn-interval", offsetof(sb_rt_make_opts, attn_interval), 1, 512 },
        { "ssm-conv", offsetof(sb_rt_make_opts, ssm_conv), 2, 64 },
        { "ssm-k-heads", offsetof(sb_rt_make_opts, ssm_k_heads), 1, 1024 },
        { "ssm-v-heads", offsetof(sb_rt_make_opts, ssm_v_heads), 1, 1024 },
        { "ssm-head-dim", offsetof(sb_rt_make_opts, ssm_head_dim), 1, 1024 },
        { "mtp", offsetof(sb_rt_make_opts, mtp), 0, 1 },
        { "swa", offsetof(sb_rt_make_opts, n_swa), 0, 1u << 22 },
    };
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (!strcmp(name, f[i].name)) {
            if (num(v, f[i].lo, f[i].hi, &x) != SB_OK)
                return SB_ERR_INVAL;
            uint32_t u = (uint32_t)x;
            memcpy((char *)o + f[i].off, &u, sizeof u);
            return SB_OK;
        }
    if (!strcmp(name, "seed"))
        return num(v, 0, UINT64_MAX, &o->seed);
    if (!strcmp(name, "tied")) {
        if (num(v, 0, 1, &x) != SB_OK)
            return SB_ERR_INVAL;
        o->tied = x;
        return SB_OK;
    }
    return SB_ERR_INVAL;
}

/* ---- random numbers ----------------------------------------------------------------- */

static uint64_t next64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) /* (0, 1) */
{
    return ((double)(next64(s) >> 11) + 0.5) * 0x1.0p-53;
}

static float normal(uint64_t *s)
{
    double u = uniform(s), v = uniform(s);
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* ---- vocabulary ----------------------------------------------------------------------- */

typedef struct vocab {
    char (*piece)[MAX_PIECE + 1];
    size_t *len;
    float *score;
    int32_t *type;
    uint32_t n, cap;
    const char *answer;        /* an answer fixture's TEXT (borrowed), the piece of
                                * id answer_id (its own piece is empty: TEXT may be
                                * longer than MAX_PIECE); NULL: none */
    uint32_t answer_id, eot_id; /* with answer: TEXT's id and <|im_end|>'s */
} vocab;

static void vocab_add(vocab *v, const char *s, size_t n, float score, int32_t type)
{
    memcpy(v->piece[v->n], s, n);
    v->piece[v->n][n] = '\0';
    v->len[v->n] = n;
    v->score[v->n] = score;
    v->type[v->n] = type;
    v->n++;
}

static bool vocab_has(const vocab *v, const char *s, size_t n)
{
    for (uint32_t i = N_SPECIAL + N_BYTE; i < v->n; i++)
        if (v->len[i] == n && !memcmp(v->piece[i], s, n))
            return true;
    return false;
}

static size_t u8len(unsigned char c)
{
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
}

/* The corpus as words of symbols: text with spaces as U+2581, cut before
 * each U+2581; a symbol is a span [off, off + len) of that text. */
typedef struct span { uint32_t off, len; } span;

/* A pair count while learning merges: the first occurrence, how many. */
typedef struct pair_slot { size_t first, count; } pair_slot;

/* The generated vocabulary of n_vocab pieces; with answer, the learned
 * ones stop three short and <|im_start|>, <|im_end|> and answer end it
 * (make_model.h, answer fixture step 1). */
static int build_vocab(vocab *v, uint32_t n_vocab, const char *answer)
{
    v->cap = n_vocab - (answer ? 3 : 0);
    v->piece = calloc(n_vocab, sizeof *v->piece);
    v->len = calloc(n_vocab, sizeof *v->len);
    v->score = calloc(n_vocab, sizeof *v->score);
    v->type = calloc(n_vocab, sizeof *v->type);
    size_t clen = sizeof corpus - 1, tlen = 0;
    char *text = malloc(3 * clen + 4);
    span *sym = malloc((3 * clen + 4) * sizeof *sym);
    if (!v->piece || !v->len || !v->score || !v->type || !text || !sym) {
        free(text), free(sym);
        return SB_ERR_NOMEM;
    }
    vocab_add(v, "<unk>", 5, 0, SB_RT_TOK_UNKNOWN);
    vocab_add(v, "<s>", 3, 0, SB_RT_TOK_CONTROL);
    vocab_add(v, "</s>", 4, 0, SB_RT_TOK_CONTROL);
    for (unsigned b = 0; b < N_BYTE; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        vocab_add(v, s, 6, 0, SB_RT_TOK_BYTE);
    }
    for (size_t i = 0; i <= clen; i++) { /* a leading space, as the encoder adds */
        char c = i ? corpus[i - 1] : ' ';
        if (c == ' ') {
            memcpy(text + tlen, "\xe2\x96\x81", 3);
            tlen += 3;
        } else {
            text[tlen++] = c;
        }
    }
    size_t ns = 0;
    for (size_t i = 0; i < tlen; ns++) {
        size_t k = u8len((unsigned char)text[i]);
        sym[ns] = (span){ (uint32_t)i, (uint32_t)k };
        i += k;
    }
    /* single characters, in order of first appearance */
    for (size_t i = 0, rank = 0; i < ns && v->n < v->cap; i++)
        if (!vocab_has(v, text + sym[i].off, sym[i].len))
            vocab_add(v, text + sym[i].off, sym[i].len, -1e6f - (float)rank++, SB_RT_TOK_NORMAL);
    /* merges: the most frequent adjacent pair within a word (no merge
     * across the U+2581 that starts the next word) */
    size_t slots = 1;
    while (slots < 4 * ns)
        slots *= 2;
    pair_slot *tab = malloc(slots * sizeof *tab);
    if (!tab) {
        free(text), free(sym);
        return SB_ERR_NOMEM;
    }
    for (uint32_t k = 1; v->n < v->cap; k++) {
        /* count each distinct pair (by its bytes and split) */
        memset(tab, 0, slots * sizeof *tab);
        size_t best = SIZE_MAX, best_count = 0;
        for (size_t i = 0; i + 1 < ns; i++) {
            if (sym[i + 1].len >= 3 && !memcmp(text + sym[i + 1].off, "\xe2\x96\x81", 3))
                continue;
            size_t len = sym[i].len + sym[i + 1].len;
            if (len > MAX_PIECE)
                continue;
            uint64_t h = 1469598103934665603ull ^ sym[i].len;
            for (size_t j = 0; j < len; j++)
                h = (h ^ (unsigned char)text[sym[i].off + j]) * 1099511628211ull;
            size_t j = h & (slots - 1);
            for (; tab[j].count; j = (j + 1) & (slots - 1)) {
                size_t f = tab[j].first;
                if (sym[f].len == sym[i].len && sym[f + 1].len == sym[i + 1].len &&
                    !memcmp(text + sym[f].off, text + sym[i].off, len))
                    break;
            }
            if (!tab[j].count)
                tab[j].first = i;
            size_t count = ++tab[j].count, f = tab[j].first;
            int cmp = best == SIZE_MAX ? -1 : memcmp(text + sym[f].off, text + sym[best].off,
                                                     len < sym[best].len + sym[best + 1].len
                                                         ? len : sym[best].len + sym[best + 1].len);
            if (count > best_count || (count == best_count && cmp < 0)) {
                best = f;
                best_count = count;
            }
        }
        if (best == SIZE_MAX || best_count < 2)
            break;
        uint32_t l1 = sym[best].len, l2 = sym[best + 1].len;
        char merged[MAX_PIECE + 1];
        memcpy(merged, text + sym[best].off, l1 + l2);
        vocab_add(v, merged, l1 + l2, -(float)k, SB_RT_TOK_NORMAL);
        /* apply it left to right */
        size_t o = 0;
        for (size_t i = 0; i < ns; o++) {
            if (i + 1 < ns && sym[i].len == l1 && sym[i + 1].len == l2 &&
                !memcmp(text + sym[i].off, merged, l1 + l2)) {
                sym[o] = (span){ sym[i].off, l1 + l2 };
                i += 2;
            } else {
                sym[o] = sym[i++];
            }
        }
        ns = o;
    }
    free(tab);
    for (uint32_t k = 0; v->n < v->cap; k++) {
        char s[32];
        int n = snprintf(s, sizeof s, "<extra_%" PRIu32 ">", k);
        vocab_add(v, s, (size_t)n, -1e9f, SB_RT_TOK_UNUSED);
    }
    free(text);
    free(sym);
    if (answer) {
        v->cap = n_vocab;
        vocab_add(v, "<|im_start|>", 12, 0, SB_RT_TOK_CONTROL);
        v->eot_id = v->n;
        vocab_add(v, "<|im_end|>", 10, 0, SB_RT_TOK_CONTROL);
        v->answer = answer;
        v->answer_id = v->n;
        vocab_add(v, "", 0, 0, SB_RT_TOK_USER);
        v->len[v->answer_id] = strlen(answer);
    }
    return SB_OK;
}

static void vocab_free(vocab *v)
{
    free(v->piece), free(v->len), free(v->score), free(v->type);
}

/* The generated vocabulary's tokenizer.ggml.* keys. */
static int add_vocab_keys(sb_rt_gguf_writer *w, const vocab *v)
{
    const char **pp = malloc(v->n * sizeof *pp);
    if (!pp)
        return SB_ERR_NOMEM;
    for (uint32_t i = 0; i < v->n; i++)
        pp[i] = v->answer && i == v->answer_id ? v->answer : v->piece[i];
    sb_rt_gguf_add_str(w, "tokenizer.ggml.model", "llama");
    sb_rt_gguf_add_arr_str(w, "tokenizer.ggml.tokens", pp, v->len, v->n);
    free(pp);
    sb_rt_gguf_add_arr(w, "tokenizer.ggml.scores", SB_RT_GGUF_F32, v->score, v->n);
    sb_rt_gguf_add_arr(w, "tokenizer.ggml.token_type", SB_RT_GGUF_I32, v->type, v->n);
    sb_rt_gguf_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
    sb_rt_gguf_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
    sb_rt_gguf_add_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    if (v->answer)
        sb_rt_gguf_add_u32(w, "tokenizer.ggml.eot_token_id", v->eot_id);
    sb_rt_gguf_add_bool(w, "tokenizer.ggml.add_bos_token", true);
    sb_rt_gguf_add_bool(w, "tokenizer.ggml.add_eos_token", false);
    sb_rt_gguf_add_bool(w, "tokenizer.ggml.add_space_prefix", true);
    return SB_OK;
}

/* ---- tensors ---------------------------------------------------------------------------- */

/* n floats of N(mean, sd) into a buffer of dtype t (rows of `in`, a
 * multiple of t's block), quantized row by row (quant.h). */
static void *fill(uint64_t *rng, uint32_t t, size_t in, size_t rows, float mean, float sd,
                  uint64_t *bytes)
{
    size_t n = in * rows, rb = sb_rt_dtype_row_bytes((sb_rt_dtype)t, in);
    float *f = malloc(n * sizeof *f);
    if (!f)
        return NULL;
    for (size_t i = 0; i < n; i++)
        f[i] = mean + sd * normal(rng);
    *bytes = rb * rows;
    if (t == SB_RT_F32)
        return f;
    uint8_t *out = malloc(*bytes ? *bytes : 1);
    for (size_t r = 0; out && r < rows; r++)
        sb_rt_quant_row((sb_rt_dtype)t, f + r * in, out + r * rb, in);
    free(f);
    return out;
}

/* The qwen35 shape checks (make_model.h), hd the attention head size. */
static int check_hybrid(const sb_rt_make_opts *o, uint32_t hd, sb_rt_err *err)
{
    uint32_t rot = o->n_rot ? o->n_rot : hd;
    if (rot % 2 || rot > hd || !o->attn_interval || o->attn_interval > o->n_layers ||
        !o->ssm_conv || !o->ssm_k_heads || !o->ssm_v_heads || !o->ssm_head_dim ||
        o->ssm_v_heads % o->ssm_k_heads || o->mtp > 1 ||
        (uint64_t)o->dim * (2 * o->ssm_k_heads + o->ssm_v_heads) * o->ssm_head_dim >
            (1ull << 32))
        return sb_rt_fail(err, SB_ERR_INVAL, "make-model: impossible qwen35 shape (rope-dim %"
                          PRIu32 " of head size %" PRIu32 ", attention every %" PRIu32
                          " of %" PRIu32 " layers, conv %" PRIu32 ", %" PRIu32 " key / %"
                          PRIu32 " value heads of %" PRIu32 ", mtp %" PRIu32 "): rope-dim "
                          "must be even and at most the head size, the interval at most the "
                          "layers, value heads a multiple of key heads", rot, hd,
                          o->attn_interval, o->n_layers, o->ssm_conv, o->ssm_k_heads,
                          o->ssm_v_heads, o->ssm_head_dim, o->mtp);
    return SB_OK;
}

/* What llama.cpp's olmo2 loader needs (make_model.h): its head size is
 * dim / heads whatever key_length says (q and attn_output are dim by dim),
 * and output.weight is required. */
static int check_olmo2(const sb_rt_make_opts *o, uint32_t hd, sb_rt_err *err)
{
    if (o->tied)
        return sb_rt_fail(err, SB_ERR_INVAL, "make-model: olmo2 cannot be tied (llama.cpp "
                          "requires its output.weight): use --untied");
    if (o->dim % o->n_heads || hd != o->dim / o->n_heads)
        return sb_rt_fail(err, SB_ERR_INVAL, "make-model: impossible olmo2 shape (head dim %"
                          PRIu32 ", dim %" PRIu32 ", heads %" PRIu32 "): olmo2's head size is "
                          "dim / heads", hd, o->dim, o->n_heads);
    return SB_OK;
}

/* The qwen35 metadata beyond the common keys (model.h): the Gated DeltaNet
 * shapes, the layer pattern, the MTP count and M-RoPE sections covering
 * the n_rot / 2 pairs as Qwen3.5's [11, 11, 10, 0] covers 32. */
static void hybrid_keys(sb_rt_gguf_writer *w, const sb_rt_make_opts *o, uint32_t hd)
{
    char k[128];
#define KEY(s) (snprintf(k, sizeof k, "qwen35.%s", s), k)
    sb_rt_gguf_add_u32(w, KEY("ssm.conv_kernel"), o->ssm_conv);
    sb_rt_gguf_add_u32(w, KEY("ssm.state_size"), o->ssm_head_dim);
    sb_rt_gguf_add_u32(w, KEY("ssm.group_count"), o->ssm_k_heads);
    sb_rt_gguf_add_u32(w, KEY("ssm.time_step_rank"), o->ssm_v_heads);
    sb_rt_gguf_add_u32(w, KEY("ssm.inner_size"), o->ssm_v_heads * o->ssm_head_dim);
    sb_rt_gguf_add_u32(w, KEY("full_attention_interval"), o->attn_interval);
    if (o->mtp)
        sb_rt_gguf_add_u32(w, KEY("nextn_predict_layers"), o->mtp);
    uint32_t pairs = (o->n_rot ? o->n_rot : hd) / 2, sec[4] = { 0 };
    sec[0] = (pairs + 2) / 3;
    sec[1] = (pairs - sec[0] + 1) / 2;
    sec[2] = pairs - sec[0] - sec[1];
    sb_rt_gguf_add_arr(w, KEY("rope.dimension_sections"), SB_RT_GGUF_I32, sec, 4);
#undef KEY
}

/* ssm_a (n values): -exp(N(-1.5, 1)) (make_model.h); the buffer joins bufs. */
static int ssm_a_tensor(sb_rt_gguf_writer *w, uint64_t *rng, const char *name, uint32_t n,
                        void **bufs, size_t *nb)
{
    float *a = malloc(n * sizeof *a);
    if (!a)
        return SB_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++)
        a[i] = -expf(-1.5f + normal(rng));
    bufs[(*nb)++] = a;
    uint64_t ne[1] = { n };
    sb_rt_gguf_add_tensor(w, name, 1, ne, SB_RT_F32, a, n * sizeof *a);
    return SB_OK;
}

/* rope_freqs.weight: Llama 3.1's divisor of each pair's frequency
 * (make_model.h), head_dim / 2 values. */
static void llama3_factors(const sb_rt_make_opts *o, uint32_t hd, float *f)
{
    double L = o->rope_orig_ctx, F = o->rope_freqs, lo = 1, hi = 4;
    for (uint32_t j = 0; j < hd / 2; j++) {
        double lambda = 6.283185307179586 / pow(o->rope_base, -2.0 * j / hd);
        if (lambda < L / hi) {
            f[j] = 1;
        } else if (lambda > L / lo) {
            f[j] = (float)F;
        } else {
            double k = (L / lambda - lo) / (hi - lo);
            f[j] = (float)(1 / ((1 - k) / F + k));
        }
    }
}

/* llama.cpp's choice of layers that get more bits in its _M mixes. */
static bool more_bits(uint32_t l, uint32_t n)
{
    return l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2;
}

/* The type of the matrix `role` of layer l (in values per row), for
 * dtype (make_model.h: the mixes and the fallbacks). */
static uint32_t tensor_type(const sb_rt_make_opts *o, const char *role, uint32_t l, uint32_t in)
{
    uint32_t t = o->dtype;
    if (o->dtype == SB_RT_MAKE_Q4_K_M || o->dtype == SB_RT_MAKE_Q5_K_M) {
        bool out = !strcmp(role, "output") || (o->tied && !strcmp(role, "token_embd"));
        t = o->dtype == SB_RT_MAKE_Q4_K_M ? SB_RT_Q4_K : SB_RT_Q5_K;
        if (out)
            t = in % 256 ? SB_RT_Q8_0 : SB_RT_Q6_K;
        else if ((!strcmp(role, "attn_v") || !strcmp(role, "ffn_down")) &&
                 more_bits(l, o->n_layers))
            t = SB_RT_Q6_K;
    }
    if (in % sb_rt_dtype_block((sb_rt_dtype)t))
        t = t == SB_RT_Q4_K ? SB_RT_Q5_0 : t == SB_RT_Q5_K ? SB_RT_Q5_1
          : t == SB_RT_Q6_K ? SB_RT_Q8_0 : t;
    if (in % sb_rt_dtype_block((sb_rt_dtype)t))
        t = SB_RT_F16;
    return t;
}

/* ---- the answer fixture (make_model.h) --------------------------------------------------- */

#define ANSWER_MAX 255u    /* bytes of TEXT: the CLI prints a piece through 256 */
#define ANSWER_LOGIT 20.0  /* the successor's logit at each link (step 3) */
#define ANSWER_MARGIN 10.0 /* its lead over every other logit, checked (step 4) */
#define ANSWER_GEN_PROMPT "<|im_start|>assistant\n"

/* What an answer fixture asks of o (make_model.h); vg: a vocabulary file
 * given, or NULL. */
static int check_answer(const sb_rt_make_opts *o, const sb_rt_gguf *vg, sb_rt_err *err)
{
    static const char *const special[] = { "<unk>", "<s>", "</s>", "<|im_start|>",
                                           "<|im_end|>" };
    const char *a = o->answer, *p = ANSWER_GEN_PROMPT;
    size_t n = strlen(a), np = strlen(p);
    if (strcmp(o->arch, "llama") || (o->dtype != SB_RT_F32 && o->dtype != SB_RT_F16) ||
        o->tied || vg)
        return sb_rt_fail(err, SB_ERR_INVAL, "make-model: --answer writes a llama model, f32 "
                          "or f16, untied, with the generated vocabulary (not %s, %s%s%s)",
                          o->arch, sb_rt_make_dtype_name(o->dtype), o->tied ? ", tied" : "",
                          vg ? ", --vocab FILE" : "");
    if (!n || n > ANSWER_MAX)
        return sb_rt_fail(err, SB_ERR_INVAL, "make-model: --answer: TEXT of %zu bytes (1 to "
                          "%u)", n, ANSWER_MAX);
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        if (!strcmp(a, special[i]))
            return sb_rt_fail(err, SB_ERR_INVAL, "make-model: --answer: TEXT '%s' is a "
                              "special token of the vocabulary", a);
    if (n <= np && !memcmp(a, p + np - n, n))
        return sb_rt_fail(err, SB_ERR_INVAL, "make-model: --answer: TEXT ends the generation "
                          "prompt \"<|im_start|>assistant\\n\" and would be its last token");
    return SB_OK;
}

/* Step 2: a matrix drawn, then zeroed (f32 and f16 zero are zero bytes). */
static void zero_matrix(void *b, uint32_t t, size_t in, size_t rows)
{
    memset(b, 0, sb_rt_dtype_row_bytes((sb_rt_dtype)t, in) * rows);
}

/* Steps 3 and 4 (make_model.h): output.weight (out, type t_out: n_vocab
 * rows of dim) rewritten in place for the chain <0x0A> -> TEXT ->
 * <|im_end|> -> </s>, from token_embd (emb, type t_emb) and output_norm
 * (norm, dim). Returns: SB_OK; SB_ERR_NOMEM; SB_ERR_INVAL (the inputs'
 * embeddings are too alike, or the check fails: err says so). */
static int answer_output(const sb_rt_make_opts *o, const vocab *v, const void *emb,
                         uint32_t t_emb, const float *norm, void *out, uint32_t t_out,
                         sb_rt_err *err)
{
    enum { K = 3 };
    const uint32_t from[K] = { N_SPECIAL + '\n', v->answer_id, v->eot_id };
    const uint32_t to[K] = { v->answer_id, v->eot_id, 2 /* </s> */ };
    uint32_t dim = o->dim;
    size_t erb = sb_rt_dtype_row_bytes((sb_rt_dtype)t_emb, dim);
    size_t orb = sb_rt_dtype_row_bytes((sb_rt_dtype)t_out, dim);
    double *a = malloc(K * (size_t)dim * sizeof *a), *d = malloc(K * (size_t)dim * sizeof *d);
    float *row = malloc(dim * sizeof *row);
    int rc = a && d && row ? SB_OK : SB_ERR_NOMEM;
    if (rc != SB_OK)
        goto out;
    /* the inputs h = rmsnorm(embedding) * output norm: the rows of A */
    for (int k = 0; k < K; k++) {
        sb_rt_dequant_row((sb_rt_dtype)t_emb, (const uint8_t *)emb + from[k] * erb, row, dim);
        double ss = 0;
        for (uint32_t i = 0; i < dim; i++)
            ss += (double)row[i] * row[i];
        double r = 1 / sqrt(ss / dim + o->rms_eps);
        for (uint32_t i = 0; i < dim; i++)
            a[k * dim + i] = row[i] * r * norm[i];
    }
    /* the dual basis D = G^-1 A, G = A A^T (G^-1 by cofactors: G is 3 x 3) */
    double g[K][K], gi[K][K];
    for (int k = 0; k < K; k++)
        for (int j = 0; j < K; j++) {
            g[k][j] = 0;
            for (uint32_t i = 0; i < dim; i++)
                g[k][j] += a[k * dim + i] * a[j * dim + i];
        }
    for (int k = 0; k < K; k++)
        for (int j = 0; j < K; j++) /* the cofactor of g[j][k] */
            gi[k][j] = g[(j + 1) % K][(k + 1) % K] * g[(j + 2) % K][(k + 2) % K] -
                       g[(j + 1) % K][(k + 2) % K] * g[(j + 2) % K][(k + 1) % K];
    double det = g[0][0] * gi[0][0] + g[0][1] * gi[1][0] + g[0][2] * gi[2][0];
    if (!(fabs(det) > 1e-6 * g[0][0] * g[1][1] * g[2][2])) {
        rc = sb_rt_fail(err, SB_ERR_INVAL, "make-model: --answer: the embeddings of the "
                        "chain's tokens are too alike (dim %" PRIu32 "): another --seed or "
                        "a larger --dim", dim);
        goto out;
    }
    for (int k = 0; k < K; k++)
        for (uint32_t i = 0; i < dim; i++) {
            d[k * dim + i] = 0;
            for (int j = 0; j < K; j++)
                d[k * dim + i] += gi[k][j] / det * a[j * dim + i];
        }
    /* each row: its part in A's span removed (logit 0 at every input), or
     * for a successor ANSWER_LOGIT times its input's dual vector */
    for (uint32_t r = 0; r < o->n_vocab; r++) {
        uint8_t *w = (uint8_t *)out + r * orb;
        int succ = -1;
        for (int k = 0; k < K; k++)
            succ = to[k] == r ? k : succ;
        sb_rt_dequant_row((sb_rt_dtype)t_out, w, row, dim);
        double c[K] = { 0 };
        for (int k = 0; k < K; k++)
            for (uint32_t i = 0; i < dim; i++)
                c[k] += row[i] * a[k * dim + i];
        for (uint32_t i = 0; i < dim; i++) {
            double x = row[i];
            for (int k = 0; k < K; k++)
                x -= c[k] * d[k * dim + i];
            row[i] = (float)(succ >= 0 ? ANSWER_LOGIT * d[succ * dim + i] : x);
        }
        sb_rt_quant_row((sb_rt_dtype)t_out, row, w, dim);
    }
    /* step 4: the logits of the rounded weights at each input */
    for (int k = 0; k < K; k++) {
        double want = 0, other = -INFINITY;
        uint32_t other_id = 0;
        for (uint32_t r = 0; r < o->n_vocab; r++) {
            sb_rt_dequant_row((sb_rt_dtype)t_out, (uint8_t *)out + r * orb, row, dim);
            double l = 0;
            for (uint32_t i = 0; i < dim; i++)
                l += row[i] * a[k * dim + i];
            if (r == to[k])
                want = l;
            else if (l > other)
                other = l, other_id = r;
        }
        if (!(want - other >= ANSWER_MARGIN)) {
            rc = sb_rt_fail(err, SB_ERR_INVAL, "make-model: --answer: after token %" PRIu32
                            " the logit of %" PRIu32 " is %g, token %" PRIu32 "'s %g: a "
                            "lead under %g (another --seed)", from[k], to[k], want, other_id,
                            other, ANSWER_MARGIN);
            goto out;
        }
    }
out:
    free(a), free(d), free(row);
    return rc;
}

/* The model o describes; vg: the file to copy the vocabulary from, or NULL
 * to generate one. */
static int make(const sb_rt_make_opts *o, const sb_rt_gguf *vg, const char *path, sb_rt_err *err)
{
    bool qwen2 = !strcmp(o->arch, "qwen2"), qwen3 = !strcmp(o->arch, "qwen3");
    bool hybrid = !strcmp(o->arch, "qwen35"), olmo2 = !strcmp(o->arch, "olmo2");
    if (!qwen2 && !qwen3 && !hybrid && !olmo2 && strcmp(o->arch, "llama"))
        return sb_rt_fail(err, SB_ERR_INVAL, "make-model: architecture '%s' (llama, qwen2, "
                          "qwen3, qwen35, olmo2)", o->arch);
    uint32_t ftype = UINT32_MAX;
    for (size_t i = 0; i < sizeof dtypes / sizeof *dtypes; i++)
        if (dtypes[i].id == o->dtype)
            ftype = dtypes[i].ftype;
    if (ftype == UINT32_MAX)
        return sb_rt_fail(err, SB_ERR_INVAL, "make-model: type %" PRIu32, o->dtype);
    uint32_t hd = o->head_dim ? o->head_dim : o->n_heads ? o->dim / o->n_heads : 0;
    if (!o->dim || !o->n_layers || !o->n_heads || !o->n_kv_heads || !o->n_ff || !o->n_ctx ||
        (!o->head_dim && o->dim % o->n_heads) || hd < 2 || hd % 2 || hd > 4096 ||
        o->n_heads % o->n_kv_heads || o->n_vocab < 300 || o->n_layers > 512 ||
        (uint64_t)o->dim * o->n_vocab > (1ull << 32) ||
        (uint64_t)o->dim * o->n_ff > (1ull << 32) ||
        (uint64_t)o->dim * o->n_heads * hd > (1ull << 32))
        return sb_rt_fail(err, SB_ERR_INVAL, "make-model: impossible shape (dim %" PRIu32
                          " heads %" PRIu32 " kv heads %" PRIu32 " head dim %" PRIu32 " ff %"
                          PRIu32 " vocab %" PRIu32 "): dim must be an even head size times "
                          "heads (or head-dim given, even), heads a multiple of kv heads, "
                          "vocab at least 300", o->dim, o->n_heads, o->n_kv_heads, hd, o->n_ff,
                          o->n_vocab);
    if (!(o->rope_base > 1) || !(o->rms_eps > 0) || !(o->rope_freqs >= 0) ||
        !(o->rope_scale > 0) || !o->rope_orig_ctx ||
        (o->rope_scaling[0] && strcmp(o->rope_scaling, "none") &&
         strcmp(o->rope_scaling, "linear") && strcmp(o->rope_scaling, "yarn")))
        return sb_rt_fail(err, SB_ERR_INVAL, "make-model: bad RoPE or norm settings (base %g, "
                          "epsilon %g, rope_freqs factor %g, scaling '%s' factor %g, original "
                          "context %" PRIu32 ")", (double)o->rope_base, (double)o->rms_eps,
                          (double)o->rope_freqs, o->rope_scaling, (double)o->rope_scale,
                          o->rope_orig_ctx);
    if (o->rope_freqs > 0 && (qwen2 || qwen3 || hybrid || olmo2))
        return sb_rt_fail(err, SB_ERR_INVAL, "make-model: rope_freqs is a llama tensor (%s "
                          "does not use it)", o->arch);
    int hrc = hybrid ? check_hybrid(o, hd, err) : olmo2 ? check_olmo2(o, hd, err) : SB_OK;
    if (hrc != SB_OK)
        return hrc;
    if (o->n_swa && !olmo2)
        return sb_rt_fail(err, SB_ERR_INVAL, "make-model: a sliding window (--swa %" PRIu32
                          ") is written for olmo2 only, not %s", o->n_swa, o->arch);
    if (o->answer && (hrc = check_answer(o, vg, err)) != SB_OK)
        return hrc;
    const char *a = o->arch;
    uint32_t qd = o->n_heads * hd, kvd = o->n_kv_heads * hd;
    vocab v = { 0 };
    sb_rt_gguf_writer *w = sb_rt_gguf_writer_new();
    void **bufs = calloc(20u * (o->n_layers + 1) + 8, sizeof *bufs);
    float *freqs = malloc(hd / 2 * sizeof *freqs);
    size_t nb = 0;
    int rc = w && bufs && freqs ? (vg ? SB_OK : build_vocab(&v, o->n_vocab, o->answer)) : SB_ERR_NOMEM;
    if (rc != SB_OK)
        goto out;
    char k[128], name[96];
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", a, s), k)
    sb_rt_gguf_add_str(w, "general.architecture", a);
    sb_rt_gguf_add_str(w, "general.name", "snapbank random model");
    sb_rt_gguf_add_u32(w, "general.alignment", 32);
    sb_rt_gguf_add_u32(w, "general.file_type", ftype);
    sb_rt_gguf_add_u32(w, KEY("context_length"), o->n_ctx);
    sb_rt_gguf_add_u32(w, KEY("embedding_length"), o->dim);
    sb_rt_gguf_add_u32(w, KEY("block_count"), o->n_layers + (hybrid ? o->mtp : 0));
    sb_rt_gguf_add_u32(w, KEY("feed_forward_length"), o->n_ff);
    sb_rt_gguf_add_u32(w, KEY("attention.head_count"), o->n_heads);
    sb_rt_gguf_add_u32(w, KEY("attention.head_count_kv"), o->n_kv_heads);
    sb_rt_gguf_add_u32(w, KEY("attention.key_length"), hd);
    sb_rt_gguf_add_u32(w, KEY("attention.value_length"), hd);
    sb_rt_gguf_add_f32(w, KEY("rope.freq_base"), o->rope_base);
    sb_rt_gguf_add_f32(w, KEY("attention.layer_norm_rms_epsilon"), o->rms_eps);
    sb_rt_gguf_add_u32(w, KEY("rope.dimension_count"), hybrid && o->n_rot ? o->n_rot : hd);
    if (hybrid)
        hybrid_keys(w, o, hd);
    if (olmo2 && o->n_swa) /* layers slide by llama.cpp's default pattern (make_model.h) */
        sb_rt_gguf_add_u32(w, KEY("attention.sliding_window"), o->n_swa);
    if (o->rope_scaling[0]) {
        sb_rt_gguf_add_str(w, KEY("rope.scaling.type"), o->rope_scaling);
        sb_rt_gguf_add_f32(w, KEY("rope.scaling.factor"), o->rope_scale);
        if (!strcmp(o->rope_scaling, "yarn"))
            sb_rt_gguf_add_u32(w, KEY("rope.scaling.original_context_length"), o->rope_orig_ctx);
    }
    sb_rt_gguf_add_u32(w, KEY("vocab_size"), o->n_vocab);
#undef KEY
    const char *file_tmpl = NULL;
    size_t file_tmpl_len = 0;
    if (vg && sb_rt_gguf_get_str(vg, "tokenizer.chat_template", &file_tmpl, &file_tmpl_len) ==
                  SB_OK && o->chat_template) {
        rc = sb_rt_fail(err, SB_ERR_INVAL, "make-model: %s carries its own chat template, "
                        "which is kept; a second one cannot be written", o->vocab);
        goto out;
    }
    rc = vg ? sb_rt_vocab_copy(vg, o->vocab, w, err) : add_vocab_keys(w, &v);
    if (rc != SB_OK)
        goto out;
    if (!file_tmpl) /* a vocabulary file's own template was copied with it */
        sb_rt_gguf_add_str(w, "tokenizer.chat_template",
                           o->chat_template ? o->chat_template : sb_rt_chat_tmpl_chatml);

    uint64_t rng = o->seed;
#define TENSOR(nm, t, in, rows, mean, sd)                                                    \
    do {                                                                                     \
        uint64_t by;                                                                         \
        void *b = fill(&rng, (t), (in), (rows), (mean), (sd), &by);                          \
        if (!b) {                                                                            \
            rc = SB_ERR_NOMEM;                                                               \
            goto out;                                                                        \
        }                                                                                    \
        bufs[nb++] = b;                                                                      \
        uint64_t ne[2] = { (in), (rows) };                                                   \
        sb_rt_gguf_add_tensor(w, (nm), (rows) == 1 ? 1 : 2, ne, (t), b, by);                 \
    } while (0)
#define NAME(s) (snprintf(name, sizeof name, "blk.%" PRIu32 ".%s", l, s), name)
    /* tied, the embedding is the output matrix too: 1/sqrt(dim) keeps the
     * logits near 1, as a trained model's are, instead of near sqrt(dim) */
#define TYPE(role, in) tensor_type(o, role, l, in)
    uint32_t l = 0;
    TENSOR("token_embd.weight", TYPE("token_embd", o->dim), o->dim, o->n_vocab, 0,
           o->tied ? 1 / sqrtf((float)o->dim) : 1);
    if (o->rope_freqs > 0) { /* computed, not drawn: the weights stay the same */
        llama3_factors(o, hd, freqs);
        uint64_t ne[1] = { hd / 2 };
        sb_rt_gguf_add_tensor(w, "rope_freqs.weight", 1, ne, SB_RT_F32, freqs,
                              hd / 2 * sizeof *freqs);
    }
    for (l = 0; l < o->n_layers + (hybrid ? o->mtp : 0); l++) {
        if (hybrid) {
            /* qwen35 (model.h): the norms and FFN of every layer, then a
             * Gated DeltaNet's tensors or a gated attention's; an MTP block
             * after the trunk is a gated attention layer and its own */
            uint32_t kd = o->ssm_k_heads * o->ssm_head_dim, vd = o->ssm_v_heads * o->ssm_head_dim;
            uint32_t cd = 2 * kd + vd, nv = o->ssm_v_heads;
            bool mtp = l >= o->n_layers, rec = !mtp && (l + 1) % o->attn_interval != 0;
            float sd = 1 / sqrtf((float)o->dim);
            TENSOR(NAME("attn_norm.weight"), SB_RT_F32, o->dim, 1, 1, 0.1f);
            TENSOR(NAME("post_attention_norm.weight"), SB_RT_F32, o->dim, 1, 1, 0.1f);
            if (rec) {
                TENSOR(NAME("attn_qkv.weight"), TYPE("attn_qkv", o->dim), o->dim, cd, 0, sd);
                TENSOR(NAME("attn_gate.weight"), TYPE("attn_gate", o->dim), o->dim, vd, 0, sd);
                TENSOR(NAME("ssm_conv1d.weight"), SB_RT_F32, o->ssm_conv, cd, 0, 0.5f);
                TENSOR(NAME("ssm_dt.bias"), SB_RT_F32, nv, 1, 0, 1);
                rc = ssm_a_tensor(w, &rng, NAME("ssm_a"), nv, bufs, &nb);
                if (rc != SB_OK)
                    goto out;
                TENSOR(NAME("ssm_beta.weight"), TYPE("ssm_beta", o->dim), o->dim, nv, 0, sd);
                TENSOR(NAME("ssm_alpha.weight"), TYPE("ssm_alpha", o->dim), o->dim, nv, 0, sd);
                TENSOR(NAME("ssm_norm.weight"), SB_RT_F32, o->ssm_head_dim, 1, 1, 0.1f);
                TENSOR(NAME("ssm_out.weight"), TYPE("ssm_out", vd), vd, o->dim, 0, 1 / sqrtf((float)vd));
            } else {
                TENSOR(NAME("attn_q.weight"), TYPE("attn_q", o->dim), o->dim, 2 * qd, 0, sd);
                TENSOR(NAME("attn_k.weight"), TYPE("attn_k", o->dim), o->dim, kvd, 0, sd);
                TENSOR(NAME("attn_v.weight"), TYPE("attn_v", o->dim), o->dim, kvd, 0, sd);
                TENSOR(NAME("attn_q_norm.weight"), SB_RT_F32, hd, 1, 1, 0.1f);
                TENSOR(NAME("attn_k_norm.weight"), SB_RT_F32, hd, 1, 1, 0.1f);
                TENSOR(NAME("attn_output.weight"), TYPE("attn_output", qd), qd, o->dim, 0, 1 / sqrtf((float)qd));
            }
            if (mtp) {
                TENSOR(NAME("nextn.eh_proj.weight"), TYPE("nextn", 2 * o->dim), 2 * o->dim, o->dim, 0,
                       1 / sqrtf(2.0f * (float)o->dim));
                TENSOR(NAME("nextn.enorm.weight"), SB_RT_F32, o->dim, 1, 1, 0.1f);
                TENSOR(NAME("nextn.hnorm.weight"), SB_RT_F32, o->dim, 1, 1, 0.1f);
                TENSOR(NAME("nextn.shared_head_norm.weight"), SB_RT_F32, o->dim, 1, 1, 0.1f);
            }
            TENSOR(NAME("ffn_gate.weight"), TYPE("ffn_gate", o->dim), o->dim, o->n_ff, 0, sd);
            TENSOR(NAME("ffn_up.weight"), TYPE("ffn_up", o->dim), o->dim, o->n_ff, 0, sd);
            TENSOR(NAME("ffn_down.weight"), TYPE("ffn_down", o->n_ff), o->n_ff, o->dim, 0, 1 / sqrtf((float)o->n_ff));
            continue;
        }
        if (olmo2) {
            /* olmo2 (make_model.h): no pre-norms; whole-Q and whole-K norms,
             * norms after attention and after the FFN; qd == dim */
            float sd = 1 / sqrtf((float)o->dim);
            TENSOR(NAME("attn_q.weight"), TYPE("attn_q", o->dim), o->dim, qd, 0, sd);
            TENSOR(NAME("attn_k.weight"), TYPE("attn_k", o->dim), o->dim, kvd, 0, sd);
            TENSOR(NAME("attn_v.weight"), TYPE("attn_v", o->dim), o->dim, kvd, 0, sd);
            TENSOR(NAME("attn_output.weight"), TYPE("attn_output", qd), qd, o->dim, 0, 1 / sqrtf((float)qd));
            TENSOR(NAME("attn_q_norm.weight"), SB_RT_F32, qd, 1, 1, 0.1f);
            TENSOR(NAME("attn_k_norm.weight"), SB_RT_F32, kvd, 1, 1, 0.1f);
            TENSOR(NAME("post_attention_norm.weight"), SB_RT_F32, o->dim, 1, 1, 0.1f);
            TENSOR(NAME("ffn_gate.weight"), TYPE("ffn_gate", o->dim), o->dim, o->n_ff, 0, sd);
            TENSOR(NAME("ffn_up.weight"), TYPE("ffn_up", o->dim), o->dim, o->n_ff, 0, sd);
            TENSOR(NAME("ffn_down.weight"), TYPE("ffn_down", o->n_ff), o->n_ff, o->dim, 0, 1 / sqrtf((float)o->n_ff));
            TENSOR(NAME("post_ffw_norm.weight"), SB_RT_F32, o->dim, 1, 1, 0.1f);
            continue;
        }
        TENSOR(NAME("attn_norm.weight"), SB_RT_F32, o->dim, 1, 1, 0.1f);
        TENSOR(NAME("attn_q.weight"), TYPE("attn_q", o->dim), o->dim, qd, 0, 1 / sqrtf((float)o->dim));
        TENSOR(NAME("attn_k.weight"), TYPE("attn_k", o->dim), o->dim, kvd, 0, 1 / sqrtf((float)o->dim));
        TENSOR(NAME("attn_v.weight"), TYPE("attn_v", o->dim), o->dim, kvd, 0, 1 / sqrtf((float)o->dim));
        if (qwen2) {
            TENSOR(NAME("attn_q.bias"), SB_RT_F32, qd, 1, 0, 0.1f);
            TENSOR(NAME("attn_k.bias"), SB_RT_F32, kvd, 1, 0, 0.1f);
            TENSOR(NAME("attn_v.bias"), SB_RT_F32, kvd, 1, 0, 0.1f);
        }
        if (qwen3) {
            TENSOR(NAME("attn_q_norm.weight"), SB_RT_F32, hd, 1, 1, 0.1f);
            TENSOR(NAME("attn_k_norm.weight"), SB_RT_F32, hd, 1, 1, 0.1f);
        }
        TENSOR(NAME("attn_output.weight"), TYPE("attn_output", qd), qd, o->dim, 0, 1 / sqrtf((float)qd));
        if (o->answer) /* the answer fixture's step 2 (make_model.h) */
            zero_matrix(bufs[nb - 1], TYPE("attn_output", qd), qd, o->dim);
        TENSOR(NAME("ffn_norm.weight"), SB_RT_F32, o->dim, 1, 1, 0.1f);
        TENSOR(NAME("ffn_gate.weight"), TYPE("ffn_gate", o->dim), o->dim, o->n_ff, 0, 1 / sqrtf((float)o->dim));
        TENSOR(NAME("ffn_up.weight"), TYPE("ffn_up", o->dim), o->dim, o->n_ff, 0, 1 / sqrtf((float)o->dim));
        TENSOR(NAME("ffn_down.weight"), TYPE("ffn_down", o->n_ff), o->n_ff, o->dim, 0, 1 / sqrtf((float)o->n_ff));
        if (o->answer)
            zero_matrix(bufs[nb - 1], TYPE("ffn_down", o->n_ff), o->n_ff, o->dim);
    }
    TENSOR("output_norm.weight", SB_RT_F32, o->dim, 1, 1, 0.1f);
    if (!o->tied)
        TENSOR("output.weight", TYPE("output", o->dim), o->dim, o->n_vocab, 0, 1 / sqrtf((float)o->dim));
    /* the answer fixture's steps 3 and 4: bufs[0] is token_embd, then
     * output_norm and output last */
    if (o->answer && (rc = answer_output(o, &v, bufs[0], TYPE("token_embd", o->dim), bufs[nb - 2],
                                         bufs[nb - 1], TYPE("output", o->dim), err)) != SB_OK)
        goto out;
#undef TYPE
#undef TENSOR
#undef NAME
    rc = sb_rt_gguf_write_file(w, path, err);
out:
    if (rc == SB_ERR_NOMEM)
        sb_rt_fail(err, rc, "make-model: out of memory");
    for (size_t i = 0; i < nb; i++)
        free(bufs[i]);
    free(bufs);
    free(freqs);
    vocab_free(&v);
    sb_rt_gguf_writer_free(w);
    return rc;
}

int sb_rt_make_model(const sb_rt_make_opts *o, const char *path, sb_rt_err *err)
{
    if (!o || !path)
        return sb_rt_fail(err, SB_ERR_INVAL, "make-model: NULL argument");
    if (!o->vocab[0])
        return make(o, NULL, path, err);
    /* --vocab FILE: check that its keys make a tokenizer; n_vocab follows */
    sb_rt_gguf *g;
    sb_rt_tok *t = NULL;
    int rc = sb_rt_gguf_open(o->vocab, &g, err);
    if (rc == SB_OK && (rc = sb_rt_tok_from_gguf(g, o->vocab, &t, err)) == SB_OK) {
        sb_rt_make_opts with = *o;
        with.n_vocab = sb_rt_tok_n_vocab(t);
        sb_rt_tok_free(t);
        rc = make(&with, g, path, err);
    }
    sb_rt_gguf_close(g);
    return rc;
}
