/* rt_consumer.c -- a program built against an installed libsnapbank_rt
 * and its public header (see run.sh): write a generated model, load it,
 * tokenize and detokenize a line through it. Exit 0 on success. */
#include <stdio.h>
#include <string.h>

#include <snapbank_rt.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: rt_consumer MODEL_PATH\n");
        return 2;
    }
    char err[256] = "";
    int rc = sbrt_make_model("tiny", NULL, 7, argv[1], err, sizeof err);
    if (rc != SB_OK) {
        fprintf(stderr, "rt_consumer: make_model: %s (%s)\n", sb_strerror(rc), err);
        return 1;
    }
    sb_rt_model *m;
    if ((rc = sbrt_model_load(argv[1], &m, err, sizeof err)) != SB_OK) {
        fprintf(stderr, "rt_consumer: load: %s (%s)\n", sb_strerror(rc), err);
        return 1;
    }
    static const char text[] = "hello world";
    uint32_t ids[64];
    size_t n = 0, len = 0;
    char back[128];
    rc = sbrt_tokenize(m, text, sizeof text - 1, 0, ids, 64, &n);
    if (rc == SB_OK)
        rc = sbrt_detokenize(m, ids, n, back, sizeof back, &len);
    if (rc != SB_OK || n == 0 || len != sizeof text - 1 || memcmp(back, text, len) != 0) {
        fprintf(stderr, "rt_consumer: round trip: %s, %zu ids, %zu bytes\n", sb_strerror(rc), n,
                len);
        sbrt_model_free(m);
        return 1;
    }
    printf("rt_consumer: %u-token vocabulary, \"%s\" is %zu ids\n", sbrt_model_n_vocab(m), text,
           n);
    sbrt_model_free(m);
    return 0;
}
