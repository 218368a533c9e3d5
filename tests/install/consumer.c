/* consumer.c -- a program an engine might write, built against an
 * installed libsnapbank (see run.sh): store a sequence, match a prompt that
 * extends it, restore, compare. Exit 0 on success. */
#include <stdio.h>
#include <string.h>

#include <snapbank.h>

int main(void)
{
    if (sb_version() != SB_VERSION_NUMBER) {
        fprintf(stderr, "consumer: header %d, library %u\n", SB_VERSION_NUMBER, sb_version());
        return 1;
    }
    sb_config cfg;
    sb_config_default(&cfg);
    sb_store *st;
    int rc = sb_store_open(&cfg, &st);
    if (rc) {
        fprintf(stderr, "consumer: open: %s\n", sb_strerror(rc));
        return 1;
    }
    uint32_t bpt[1] = { 8 };
    static const char id[] = "consumer-model";
    sb_layout lay = { .model_id = id, .model_id_bytes = sizeof id - 1, .page_tokens = 4,
                      .n_tensors = 1, .bytes_per_token = bpt };
    sb_ns *ns;
    if ((rc = sb_ns_open(st, &lay, "t", 1, &ns))) {
        fprintf(stderr, "consumer: ns: %s\n", sb_strerror(rc));
        return 1;
    }
    uint32_t tok[10];
    unsigned char kv[10 * 8], out[10 * 8];
    for (int i = 0; i < 10; i++)
        tok[i] = (uint32_t)(100 + i);
    for (int i = 0; i < 80; i++)
        kv[i] = (unsigned char)(i * 7);
    const void *src[1] = { kv };
    size_t stored;
    if ((rc = sb_ns_put(ns, tok, 7, src, NULL, &stored)) || stored != 7) {
        fprintf(stderr, "consumer: put: %s\n", sb_strerror(rc));
        return 1;
    }
    sb_match *m;
    sb_match_info info;
    void *dst[1] = { out };
    if ((rc = sb_ns_match(ns, tok, 10, &m)) || (rc = sb_match_get_info(m, &info)) ||
        info.n_tokens != 7 || (rc = sb_match_restore(m, 7, dst, NULL)) ||
        memcmp(out, kv, 7 * 8) != 0) {
        fprintf(stderr, "consumer: match/restore: %s (L=%zu)\n", sb_strerror(rc), info.n_tokens);
        return 1;
    }
    sb_match_release(m);
    sb_ns_close(ns);
    sb_store_close(st);
    printf("consumer: ok (restored %zu of 10 tokens)\n", info.n_tokens);
    return 0;
}
