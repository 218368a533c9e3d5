/* test_llama.c -- PLACEHOLDER while the connector is written: the lead
 * replaces this file's contents with the connector's tests. It only checks
 * the build plumbing (tests/CMakeLists.txt, sb_add_llama_test).
 *
 * Description: a program linking libsnapbank_llama, and through it
 * libllama and libggml, without LD_LIBRARY_PATH; it loads the CPU backends
 * from SB_LLAMA_BACKEND_DIR (empty: libggml has them), finds at least one
 * device, and prints llama_print_system_info(). Exit 0 on success. */
#include <stdio.h>

#include "ggml-backend.h"
#include "snapbank_llama.h"

int main(void)
{
    if (SB_LLAMA_BACKEND_DIR[0] != '\0')
        ggml_backend_load_all_from_path(SB_LLAMA_BACKEND_DIR);
    llama_backend_init();
    size_t n_dev = ggml_backend_dev_count();
    printf("test_llama: %zu device(s) from \"%s\"; %s\n", n_dev, SB_LLAMA_BACKEND_DIR,
           llama_print_system_info());
    llama_backend_free();
    if (n_dev == 0) {
        fprintf(stderr, "test_llama: no backend device: nothing loaded from \"%s\"\n",
                SB_LLAMA_BACKEND_DIR);
        return 1;
    }
    return 0;
}
