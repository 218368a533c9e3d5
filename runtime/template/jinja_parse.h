/* jinja_parse.h -- what the lexer (jinja_lex.c) and the parser
 * (jinja_parse.c) share: tokens and the name table. Private to them. */
#ifndef SB_RT_JINJA_PARSE_H
#define SB_RT_JINJA_PARSE_H

#include "template/jinja.h"

typedef enum jt_kind {
    JT_EOF, JT_DATA, JT_VAR_BEGIN, JT_VAR_END, JT_BLOCK_BEGIN, JT_BLOCK_END,
    JT_NAME, JT_STRING, JT_INT, JT_FLOAT, JT_OP,
} jt_kind;

typedef struct jtok {
    uint8_t kind;               /* jt_kind */
    uint32_t line;
    const char *s;              /* DATA: text; STRING: decoded value; NAME: interned; OP */
    size_t len;
    int64_t i;                  /* INT */
    double f;                   /* FLOAT */
} jtok;

/* The name table: one copy of each name a template uses (interned, so
 * names compare by pointer), in the parse's arena. Zeroed is empty. */
typedef struct jnames {
    jarena *a;
    const char **names;         /* open addressing */
    size_t n_names, cap_names;
} jnames;

typedef struct jlexer {
    jctx *c;
    jarena *a;
    jnames *names;              /* where names are interned */
    const char *src;            /* normalized source */
    size_t n_src;
    jtok *toks;
    size_t n, cap;
    char *brackets;             /* a tag's open brackets (max_depth of them) */
    size_t line_pos;            /* line_at's cache: line of line_pos */
    uint32_t line_line;
} jlexer;

/* sb_rt_jlex -- tokenize source into L->toks (ending with JT_EOF); sb_rt_jfail on error. */
void sb_rt_jlex(jlexer *L, const char *source, size_t len);

/* sb_rt_jintern -- the one copy of name s[0, n) in t (NUL-terminated, in
 * t's arena; jinja_lex.c, which interns every name it reads). */
const char *sb_rt_jintern(jnames *t, const char *s, size_t n);

#endif /* SB_RT_JINJA_PARSE_H */
