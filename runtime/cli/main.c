/* main.c -- `snapbank`: dispatch to subcommands. */
#include <stdio.h>
#include <string.h>

#include "bench_tool.h"
#include "cli.h"
#include "snapbank.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} commands[] = {
    { "demo", sb_cli_demo,
      "the main demo: a chat with a long system prompt, restarted: cold, warm_prefix, ssd" },
    { "bank-demo", sb_cli_bank_demo,
      "scripted multi-turn sessions over synthetic KV state: shows prefix reuse" },
    { "fsck", sb_cli_fsck, "verify a store directory offline: superblock, records, summaries" },
    { "stat", sb_cli_stat, "open a store directory and report what recovery found and dropped" },
    { "run", sb_cli_run, "run a llama-family GGUF model on the CPU, its KV cache in snapbank pages" },
    { "chat", sb_cli_chat,
      "a multi-turn chat whose KV is restored from the bank (cold, warm_prefix, ssd)" },
    { "serve", sb_cli_serve,
      "an OpenAI-compatible HTTP server whose every answer says where its prompt came from" },
    { "remote-acl", sb_cli_remote_acl,
      "print the ACL rule that confines a tenant to its scope's shared-tier keys" },
    { "make-model", sb_cli_make_model, "write a GGUF model with random weights (tiny, small)" },
    { "tokenize", sb_cli_tokenize,
      "the token ids of a text by a GGUF file's vocabulary, like llama-tokenize" },
    { "bench", sb_bench_tool_main,
      "fio-style wear and throughput jobs against the store, fio beside them" },
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: snapbank <command> [options]\n"
            "       snapbank --help | --version\n\n"
            "snapbank keeps LLM state (KV cache, recurrent state) keyed by the token\n"
            "prefixes that produced it, so an engine restores a prefix it has seen\n"
            "instead of recomputing it.\n\n"
            "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'snapbank <command> --help' describes a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        unsigned v = sb_version();
        printf("snapbank %u.%u.%u\n", v / 10000, v / 100 % 100, v % 100);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "snapbank: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
