/* chat_family.h -- the built-in renderers of chat_family.c (chat formats by
 * family and variant) and the family signatures. Private to chat_tmpl.c and
 * the tests. */
#ifndef SB_RT_CHAT_FAMILY_H
#define SB_RT_CHAT_FAMILY_H

#include "template/jinja.h"

typedef struct cf_msg {
    const jstr *role, *content; /* tainted (the caller's) */
} cf_msg;

typedef struct cf_in {
    const cf_msg *m;
    size_t n;                   /* at least 1 */
    bool gen;                   /* add_generation_prompt */
    const char *bos, *eos;      /* never NULL ("" when the vocabulary has none) */
} cf_in;

/* A variant writes the prompt to c->out; it fails through sb_rt_jfail (the
 * template's raise_exception messages, verbatim). */
typedef void (*cf_render_fn)(jctx *c, const cf_in *in);

typedef struct cf_variant {
    const char *family;         /* "chatml", "llama3", ... */
    const char *name;           /* "qwen2.5", ... */
    cf_render_fn render;
} cf_variant;

extern const cf_variant sb_rt_cf_variants[];
extern const size_t sb_rt_cf_n_variants;

/* sb_rt_cf_detect -- the family whose signature src carries, or NULL. */
const char *sb_rt_cf_detect(const char *src);

/* sb_rt_cf_is_family -- whether name is a family's name. */
bool sb_rt_cf_is_family(const char *name);

/* sb_rt_cf_render -- render msgs with variant v into *out (as sb_rt_jinja_render:
 * SB_OK, SB_ERR_INVAL, SB_ERR_RANGE, SB_ERR_NOMEM). */
int sb_rt_cf_render(const cf_variant *v, const sb_rt_chat_msg *msgs, size_t n, bool gen,
                    const char *bos, const char *eos, const sb_rt_chat_limits *lim,
                    sb_rt_chat_text *out, sb_rt_err *err);

#endif /* SB_RT_CHAT_FAMILY_H */
