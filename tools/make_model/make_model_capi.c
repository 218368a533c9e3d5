/* make_model_capi.c -- sbrt_make_model, the generator of make_model.h in
 * the runtime's flat C API (snapbank_rt.h): libsnapbank_rt.so carries it so
 * the bindings can write test models without the CLI. */
#include "snapbank_rt.h"

#include <stdio.h>

#include "make_model/make_model.h"

static void put_err(char *err, size_t cap, const char *msg)
{
    if (err && cap)
        snprintf(err, cap, "%s", msg);
}

int sbrt_make_model(const char *preset, const char *dtype, uint64_t seed, const char *path,
                    char *err, size_t cap)
{
    sb_rt_make_opts o;
    if (!preset || !path || sb_rt_make_opts_preset(&o, preset) != SB_OK) {
        put_err(err, cap, "preset must be one of " SB_RT_MAKE_PRESETS);
        return SB_ERR_INVAL;
    }
    if (dtype && sb_rt_make_opts_set(&o, "dtype", dtype) != SB_OK) {
        put_err(err, cap, "dtype must be one of f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, "
                          "q4_k, q5_k, q6_k, q4_k_m, q5_k_m");
        return SB_ERR_INVAL;
    }
    o.seed = seed;
    sb_rt_err e = { 0 };
    int rc = sb_rt_make_model(&o, path, &e);
    if (rc != SB_OK)
        put_err(err, cap, e.msg);
    return rc;
}
