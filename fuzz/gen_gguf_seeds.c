/* gen_gguf_seeds.c -- writes fuzz/corpus/gguf/: small generated models
 * (llama F32, qwen2 Q8_0, tied F16) and a file with every value type.
 * Usage: gen_gguf_seeds DIR. Run it when the generator or the format
 * changes. */
#include <stdio.h>
#include <string.h>

#include "gguf/gguf_write.h"
#include "make_model/make_model.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_gguf_seeds DIR\n");
        return 2;
    }
    static const char *const v[][2] = {
        { "arch", "llama" }, { "dtype", "f32" }, { "arch", "qwen2" }, { "dtype", "q8_0" },
        { "arch", "llama" }, { "dtype", "f16" },
    };
    for (int k = 0; k < 3; k++) {
        sb_rt_make_opts o;
        sb_rt_make_opts_preset(&o, "tiny");
        sb_rt_make_opts_set(&o, v[2 * k][0], v[2 * k][1]);
        sb_rt_make_opts_set(&o, v[2 * k + 1][0], v[2 * k + 1][1]);
        sb_rt_make_opts_set(&o, "dim", "32");
        sb_rt_make_opts_set(&o, "layers", "1");
        sb_rt_make_opts_set(&o, "heads", "2");
        sb_rt_make_opts_set(&o, "kv-heads", "1");
        sb_rt_make_opts_set(&o, "ff", "32");
        sb_rt_make_opts_set(&o, "vocab", "300");
        sb_rt_make_opts_set(&o, "ctx", "64");
        o.tied = k == 2;
        o.seed = (uint64_t)k + 1;
        char path[4096];
        snprintf(path, sizeof path, "%s/model-%d.gguf", argv[1], k);
        sb_rt_err err = { 0 };
        if (sb_rt_make_model(&o, path, &err) != 0) {
            fprintf(stderr, "gen_gguf_seeds: %s\n", err.msg);
            return 1;
        }
    }
    sb_rt_gguf_writer *w = sb_rt_gguf_writer_new();
    uint8_t u8 = 7;
    double f64 = 1.5;
    int32_t arr[2] = { -1, 2 };
    const char *ss[2] = { "x", "yz" };
    size_t sl[2] = { 1, 2 };
    static float f[32];
    uint64_t ne[2] = { 16, 2 };
    sb_rt_gguf_add_raw(w, "a.u8", 0, &u8, 1);
    sb_rt_gguf_add_u32(w, "a.u32", 3);
    sb_rt_gguf_add_u64(w, "a.u64", 4);
    sb_rt_gguf_add_i32(w, "a.i32", -4);
    sb_rt_gguf_add_f32(w, "a.f32", 0.5f);
    sb_rt_gguf_add_raw(w, "a.f64", 12, &f64, 8);
    sb_rt_gguf_add_bool(w, "a.bool", 1);
    sb_rt_gguf_add_str(w, "a.str", "s");
    sb_rt_gguf_add_arr(w, "a.arr", 5, arr, 2);
    sb_rt_gguf_add_arr_str(w, "a.strs", ss, sl, 2);
    sb_rt_gguf_add_tensor(w, "t", 2, ne, 0, f, sizeof f);
    char path[4096];
    snprintf(path, sizeof path, "%s/values.gguf", argv[1]);
    sb_rt_err err = { 0 };
    int rc = sb_rt_gguf_write_file(w, path, &err);
    sb_rt_gguf_writer_free(w);
    if (rc != 0) {
        fprintf(stderr, "gen_gguf_seeds: %s\n", err.msg);
        return 1;
    }
    return 0;
}
