/* connector.c -- placeholder while the connector is written (the build
 * plumbing is developed beside it). */
#include "snapbank_llama.h"

const char *sb_llama_strerror(int err) { return sb_strerror(err); }
void sb_llama_config_default(sb_llama_config *cfg) { (void)cfg; }
int sb_llama_attach(sb_store *st, struct llama_context *ctx, const sb_llama_config *cfg,
                    sb_llama **out, char *err, size_t err_len)
{
    (void)st; (void)ctx; (void)cfg; (void)err; (void)err_len;
    if (out)
        *out = NULL;
    (void)llama_n_ctx(ctx);
    return SB_ERR_UNSUPPORTED;
}
void sb_llama_detach(sb_llama *sl) { (void)sl; }
