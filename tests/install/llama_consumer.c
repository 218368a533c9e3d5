/* llama_consumer.c -- a program built against an installed
 * libsnapbank_llama and llama.cpp's libllama (see run.sh): with pkg-config
 * snapbank_llama and with find_package(snapbank_llama). It needs no model:
 * it fills a configuration, names a connector error, and asks libllama
 * for its system line, so that every library is linked and loaded.
 * Exit 0 on success. */
#include <stdio.h>
#include <string.h>

#include <snapbank_llama.h>

int main(void)
{
    sb_llama_config cfg;
    memset(&cfg, 0xa5, sizeof cfg);
    sb_llama_config_default(&cfg);
    const char *msg = sb_llama_strerror(SB_LLAMA_ERR_FORMAT);
    const char *sys = llama_print_system_info();
    if (msg == NULL || msg[0] == '\0' || sys == NULL) {
        fprintf(stderr, "llama_consumer: sb_llama_strerror or llama_print_system_info gave nothing\n");
        return 1;
    }
    printf("llama_consumer: ok (connector %d, SB_LLAMA_ERR_FORMAT: \"%s\")\n", SB_LLAMA_VERSION,
           msg);
    return 0;
}
