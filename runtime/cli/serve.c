/* serve.c -- `snapbank serve MODEL`: the OpenAI-compatible server
 * (runtime/server/server.h); this file reads its options.
 * Exit status: 0 after a clean shutdown, 1 failure, 2 usage error. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli/rtcli.h"
#include "server/server.h"

static void serve_usage(FILE *f)
{
    fprintf(f,
        "usage: snapbank serve MODEL [options]\n\n"
        "An OpenAI-compatible HTTP server over the bank: POST /v1/chat/completions and\n"
        "/v1/completions (streamed or not), GET /v1/models, GET /health, GET /metrics\n"
        "(Prometheus), GET and DELETE /v1/sessions/ID, and behind the admin key GET\n"
        "/v1/bank/stats, POST /v1/bank/flush, POST /v1/bank/clear. Every response's\n"
        "usage says where its prompt came from: cache_mode cold, warm_prefix (RAM),\n"
        "ssd (disk) or remote (fetched from the shared tier), the tokens from each,\n"
        "restore_ms, ttft_ms and the miss reason (docs: README, snapbank serve).\n"
        "SIGTERM or SIGINT: stop accepting, finish what runs (--shutdown-timeout),\n"
        "flush the bank, exit 0.\n\n"
        "listening:\n"
        "  --host ADDR              address to listen on (default 127.0.0.1); a\n"
        "                           non-loopback one needs --api-key-file or\n"
        "                           --allow-unauthenticated\n"
        "  --port N                 port (default 8080; 0: any free port)\n"
        "  --port-file FILE         write the port listened on to FILE\n"
        "  --api-key-file FILE      API keys, one 'KEY TENANT' per line: each tenant a\n"
        "                           bank scope of its own (nothing shared); requests\n"
        "                           without a listed key get 401. Default: no keys, one\n"
        "                           tenant\n"
        "  --admin-key-file FILE    the key of the /v1/bank/* endpoints (off without it)\n"
        "  --allow-unauthenticated  listen on a non-loopback --host without API keys\n"
        "  --metrics-auth M         who may read GET /metrics: none (default: anyone who\n"
        "                           reaches the port), key (any key of --api-key-file, or\n"
        "                           the admin key), admin (the admin key); else 401\n"
        "  --cors-origin ORIGIN     let browser pages from ORIGIN (e.g.\n"
        "                           https://app.example.com; repeatable; '*': any) call\n"
        "                           the server: answers carry Access-Control-Allow-Origin,\n"
        "                           an OPTIONS preflight gets 204 (403 from another\n"
        "                           origin). Default: none (OPTIONS is 405)\n"
        "  --http-threads N         HTTP threads (default 4)\n"
        "  --max-connections N      connections at once (default 256); at most three\n"
        "                           quarters of them may wait for their request header:\n"
        "                           past that the oldest waiting one is closed\n"
        "  --max-connections-per-ip N  connections from one address (default 64; 0: no\n"
        "                           limit); more are closed at once\n"
        "  --header-timeout S       a request's whole header must arrive within S seconds\n"
        "                           of the connection (or of the previous answer on a\n"
        "                           kept-alive one), else it is closed (default 10)\n"
        "  --timeout S              idle timeout once the header is in: reading the body,\n"
        "                           writing the answer, seconds (default 600)\n"
        "  --max-body-bytes N       largest request body (default 4194304; over: 413)\n\n"
        "the model:\n"
        "  --engine E               what computes: builtin (default: snapbank's CPU runtime)\n"
        "                           or llama.cpp (llama.cpp's libllama, the bank through the\n"
        "                           llama.cpp connector; where snapbank was built with it)\n"
        "  -ngl, --gpu-layers N     llama.cpp: layers offloaded to a GPU backend (default:\n"
        "                           llama.cpp's)\n"
        "  -kvu, --kv-unified       llama.cpp: one KV cache the slots share (a sequence may\n"
        "                           reach all of --ctx), not --ctx split among them; when\n"
        "                           the sequences fill it, prompts wait for cells and the\n"
        "                           longest answer ends (finish_reason length)\n"
        "  --model-name NAME        the model id clients send (default: the file name\n"
        "                           without .gguf)\n"
        "  --chat-template NAME     the chat template, overriding the model's (chatml)\n"
        "  --chat-template-file F   a Jinja chat template, overriding the model's\n"
        "  --ctx N                  longest sequence, prompt and answer (default: the\n"
        "                           model's context); llama.cpp: its KV cells, split\n"
        "                           evenly among the --parallel slots, as llama-server's -c\n"
        "  --max-tokens N           tokens to generate when a request sets no max_tokens\n"
        "                           (default: up to the context's end)\n"
        "  --threads N              forward-pass threads (default: every online CPU)\n"
        "  --batch N                rows in one forward pass: the decode steps of the\n"
        "                           running requests and chunks of new prompts (default 256)\n\n"
        "scheduling:\n"
        "  --parallel N             requests served at once, their decode steps batched\n"
        "                           into one forward pass (default 4)\n"
        "  --max-queue N            requests that may wait for a slot; beyond it 503 with\n"
        "                           Retry-After (default 64)\n"
        "  --shutdown-timeout S     on SIGTERM, seconds in-flight requests may take to\n"
        "                           finish before they are cancelled (default 10)\n\n"
        "the bank:\n"
        "  --bank-dir DIR           keep the bank in DIR/store (with its disk tier) and\n"
        "                           sessions in DIR/sessions; default: RAM only\n"
        "  --ram-mib N              RAM budget of the bank, MiB (default 1024)\n"
        "  --ssd-session-cache M    on (default): write pages to disk and restore them;\n"
        "                           write-only: write, never restore; off: RAM only\n"
        "  --disk-restore M         auto (default): read a prefix's disk pages when that is\n"
        "                           estimated faster than computing them again (measured\n"
        "                           rates); always: read them whatever the estimate\n"
        "  --min-prefix N           write to disk only sequences of N tokens or more\n"
        "                           (default 512)\n"
        "  --page-tokens N          tokens per KV page (default 16)\n"
        "  --disk-mib N             the disk tier's cap, MiB (default: what it holds plus a\n"
        "                           quarter of the free space)\n"
        "  --write-budget-mib N     the disk tier's hourly write budget, MiB (default\n"
        "                           131072)\n"
        "  --durability D           none, periodic (default) or commit\n"
        "  --max-sessions N         sessions kept in RAM (default 4096; more are read\n"
        "                           back from DIR/sessions)\n\n"
        "the shared tier (pages shared with other nodes on a Redis Cluster):\n"
        "%s\n"
        "llama-server's options, with the same meaning: -m/--model FILE, -c/--ctx-size\n"
        "  (--ctx), -np (--parallel), -t (--threads), -b/--batch-size (--batch), -ngl,\n"
        "  --host, --port, --api-key KEY[,KEY...] (keys of the one default tenant; not\n"
        "  with --api-key-file), -a/--alias (--model-name), -n/--n-predict (--max-tokens;\n"
        "  -1: none), --threads-http (--http-threads), -to (--timeout),\n"
        "  --chat-template-file, -kvu/--kv-unified; --jinja, -cb/--cont-batching,\n"
        "  -no-kvu and --metrics are what it does by default.\n"
        "  Every other llama-server option is refused by name.\n\n"
        "  --quiet                  no log line per request\n"
        "  -h, --help               this help\n\n"
        "exit status: 0 after a clean shutdown, 1 failure, 2 usage.\n",
        rt_shared_help);
}

/* llama-server's flags (llama.cpp v0.5.0's `llama-server --help`) that
 * snapbank serve does not take: each is refused by name, never ignored.
 * Those it takes with the same meaning are in the usage's "llama-server's
 * flags" and in the option loop below. */
static const char *const llama_server_only[] = {
    "-fa", "--flash-attn", "-ctk", "--cache-type-k", "-ctv", "--cache-type-v", "-ub",
    "--ubatch-size", "-tb", "--threads-batch", "--mlock", "--no-mmap", "--mmap", "--numa",
    "-dev", "--device", "-sm", "--split-mode", "-ts", "--tensor-split", "-mg", "--main-gpu",
    "--rope-scaling", "--rope-scale", "--rope-freq-base", "--rope-freq-scale", "--yarn-orig-ctx",
    "--yarn-ext-factor", "--yarn-attn-factor", "--yarn-beta-slow", "--yarn-beta-fast",
    "--lora", "--lora-scaled", "--control-vector", "--mmproj", "--mmproj-url", "-mu",
    "--model-url", "-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-hft", "--hf-token",
    "--embedding", "--embeddings", "--reranking", "--rerank", "--pooling", "--slot-save-path",
    "--chat-template-kwargs", "--no-jinja", "--grammar",
    "--grammar-file", "-j", "--json-schema", "-s", "--seed", "--temp", "--top-k", "--top-p",
    "--min-p", "--repeat-penalty", "--samplers", "--ssl-key-file", "--ssl-cert-file",
    "--no-cont-batching", "-nocb", "--cache-reuse", "--ctx-checkpoints",
    "--swa-full", "-md", "--model-draft", "--draft", "--draft-max", "--draft-min",
    "--spec-replace", "-cd", "--ctx-size-draft", "-ngld", "--gpu-layers-draft", "--keep",
    "--override-kv", "--override-tensor", "-ot", "--cpu-moe", "--n-cpu-moe", "-C", "--cpu-mask",
    "-Cr", "--cpu-range", "--prio", "--poll", "--reasoning-format", "--reasoning-budget",
    "-sp", "--special", "--no-warmup", "--defrag-thold", "-dt", "--slot-prompt-similarity",
    "-sps", "--lora-init-without-apply", "--api-prefix", "--path", "--no-webui", "--webui",
    "--props", "--slots", "--no-slots", "--log-file", "--log-colors", "-lv", "--verbosity",
    "--log-verbosity", "-v", "--verbose", "--log-disable", "--cache-ram", "-cram",
    "--kv-offload", "-nkvo", "--no-kv-offload", "--no-op-offload", "--check-tensors",
    "--tools", "--no-prefill-assistant", "--embd-normalize", "--n-probs",
};

static bool llama_server_flag(const char *a)
{
    for (size_t i = 0; i < sizeof llama_server_only / sizeof *llama_server_only; i++)
        if (!strcmp(a, llama_server_only[i]))
            return true;
    return false;
}

static int dbl(const char *v, double lo, double hi, double *out)
{
    if (!v || !*v)
        return -1;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || !(x >= lo && x <= hi))
        return -1;
    *out = x;
    return 0;
}

int sb_cli_serve(int argc, char **argv)
{
    srv_config c;
    srv_config_default(&c);
    const char *shared_auth = NULL;
    const char *cors[64]; /* --cors-origin values */
    c.cors_origins = cors;
    rt_shared_tune tune = { 0 };
    const char *llama_flag = NULL; /* an option of llama.cpp's engine only, as given */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x = 0;
        int bad = 0, took = 2;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            serve_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--allow-unauthenticated")) {
            c.allow_public = true, took = 1;
        } else if (!strcmp(a, "--quiet")) {
            c.log_requests = false, took = 1;
        } else if (!strcmp(a, "--engine")) {
            bad = !v || (strcmp(v, "builtin") && strcmp(v, "llama.cpp"));
            c.engine = v && !strcmp(v, "llama.cpp") ? SRV_ENGINE_LLAMA : SRV_ENGINE_BUILTIN;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            bad = !v || !*v || c.model, c.model = v;
        } else if (!strcmp(a, "-ngl") || !strcmp(a, "--gpu-layers") ||
                   !strcmp(a, "--n-gpu-layers")) {
            bad = rt_parse_u64(v, 0, 100000, &x), c.gpu_layers = (int)x, llama_flag = a;
        } else if (!strcmp(a, "--api-key")) {
            bad = !v || !*v, c.api_key = v;
        } else if (!strcmp(a, "--jinja") || !strcmp(a, "-cb") || !strcmp(a, "--cont-batching") ||
                   !strcmp(a, "-no-kvu") || !strcmp(a, "--no-kv-unified") ||
                   !strcmp(a, "--metrics")) {
            took = 1; /* what snapbank serve does by default */
        } else if (!strcmp(a, "-kvu") || !strcmp(a, "--kv-unified")) {
            c.kv_unified = true, took = 1, llama_flag = llama_flag ? llama_flag : a;
        } else if (!strcmp(a, "-a") || !strcmp(a, "--alias")) {
            bad = !v || !*v || strlen(v) > 255, c.model_name = v;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict") || !strcmp(a, "--predict")) {
            long long np = v ? strtoll(v, NULL, 10) : 0; /* -1: to the context's end */
            bad = !v || (np != -1 && rt_parse_u64(v, 1, UINT32_MAX, &x));
            c.default_max_tokens = np == -1 ? 0 : (size_t)x;
        } else if (!strcmp(a, "--threads-http")) {
            bad = rt_parse_u64(v, 1, 256, &x), c.http_threads = (unsigned)x;
        } else if (!strcmp(a, "-to")) {
            bad = rt_parse_u64(v, 1, 86400, &x), c.timeout_s = (unsigned)x;
        } else if (!strcmp(a, "--host")) {
            bad = !v || !*v, c.host = v;
        } else if (!strcmp(a, "--port")) {
            bad = rt_parse_u64(v, 0, 65535, &x), c.port = (unsigned)x;
        } else if (!strcmp(a, "--port-file")) {
            bad = !v, c.port_file = v;
        } else if (!strcmp(a, "--api-key-file")) {
            bad = !v, c.api_key_file = v;
        } else if (!strcmp(a, "--admin-key-file")) {
            bad = !v, c.admin_key_file = v;
        } else if (!strcmp(a, "--metrics-auth")) {
            bad = !v;
            if (v && !strcmp(v, "none"))
                c.metrics_auth = SRV_METRICS_OPEN;
            else if (v && !strcmp(v, "key"))
                c.metrics_auth = SRV_METRICS_KEY;
            else if (v && !strcmp(v, "admin"))
                c.metrics_auth = SRV_METRICS_ADMIN;
            else
                bad = 1;
        } else if (!strcmp(a, "--cors-origin")) {
            bad = !v || !*v || (strcmp(v, "*") && !strstr(v, "://")) || c.n_cors_origins >= 64;
            if (!bad)
                cors[c.n_cors_origins++] = v;
        } else if (!strcmp(a, "--http-threads")) {
            bad = rt_parse_u64(v, 1, 256, &x), c.http_threads = (unsigned)x;
        } else if (!strcmp(a, "--max-connections")) {
            bad = rt_parse_u64(v, 1, 1u << 20, &x), c.max_conns = (unsigned)x;
        } else if (!strcmp(a, "--max-connections-per-ip")) {
            bad = rt_parse_u64(v, 0, 1u << 20, &x), c.max_conns_per_ip = (unsigned)x;
        } else if (!strcmp(a, "--header-timeout")) {
            bad = rt_parse_u64(v, 1, 3600, &x), c.header_timeout_s = (unsigned)x;
        } else if (!strcmp(a, "--timeout")) {
            bad = rt_parse_u64(v, 1, 86400, &x), c.timeout_s = (unsigned)x;
        } else if (!strcmp(a, "--max-body-bytes")) {
            bad = rt_parse_u64(v, 1024, 1ull << 30, &x), c.max_body = (size_t)x;
        } else if (!strcmp(a, "--model-name")) {
            bad = !v || !*v || strlen(v) > 255, c.model_name = v;
        } else if (!strcmp(a, "--chat-template")) {
            bad = !v || !*v, c.chat_template = v;
        } else if (!strcmp(a, "--chat-template-file")) {
            bad = !v || !*v, c.chat_template_file = v;
        } else if (!strcmp(a, "--ctx") || !strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            bad = rt_parse_u64(v, 2, UINT32_MAX, &x), c.ctx = (uint32_t)x;
        } else if (!strcmp(a, "--max-tokens")) {
            bad = rt_parse_u64(v, 1, UINT32_MAX, &x), c.default_max_tokens = (size_t)x;
        } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
            bad = rt_parse_u64(v, 1, 256, &x), c.threads = (unsigned)x;
        } else if (!strcmp(a, "--batch") || !strcmp(a, "-b") || !strcmp(a, "--batch-size")) {
            bad = rt_parse_u64(v, 1, 65536, &x), c.batch = (uint32_t)x;
        } else if (!strcmp(a, "--parallel") || !strcmp(a, "-np")) {
            bad = rt_parse_u64(v, 1, 1024, &x), c.parallel = (size_t)x;
        } else if (!strcmp(a, "--max-queue")) {
            bad = rt_parse_u64(v, 1, 1u << 20, &x), c.max_queue = (size_t)x;
        } else if (!strcmp(a, "--shutdown-timeout")) {
            bad = dbl(v, 0, 86400, &c.shutdown_timeout_s);
        } else if (!strcmp(a, "--bank-dir")) {
            bad = !v || !*v, c.bank_dir = v;
        } else if (!strcmp(a, "--ram-mib")) {
            bad = rt_parse_u64(v, 16, 1u << 24, &x), c.ram_mib = x;
        } else if (!strcmp(a, "--ssd-session-cache")) {
            bad = !v;
            if (v && !strcmp(v, "on"))
                c.ssd = SRV_SSD_ON;
            else if (v && !strcmp(v, "off"))
                c.ssd = SRV_SSD_OFF;
            else if (v && !strcmp(v, "write-only"))
                c.ssd = SRV_SSD_WRITE_ONLY;
            else
                bad = 1;
        } else if (!strcmp(a, "--disk-restore")) {
            bad = !v || (strcmp(v, "auto") && strcmp(v, "always"));
            c.disk_always = v && !strcmp(v, "always");
        } else if (!strcmp(a, "--min-prefix")) {
            bad = rt_parse_u64(v, 0, UINT32_MAX, &x), c.min_prefix = (uint32_t)x;
        } else if (!strcmp(a, "--page-tokens")) {
            bad = rt_parse_u64(v, 1, 65536, &x), c.page_tokens = (uint32_t)x;
        } else if (!strcmp(a, "--disk-mib")) {
            bad = rt_parse_u64(v, 1, 1ull << 40, &x), c.disk_mib = x;
        } else if (!strcmp(a, "--write-budget-mib")) {
            bad = rt_parse_u64(v, 1, 1ull << 40, &x), c.write_budget_mib = x;
        } else if (!strcmp(a, "--durability")) {
            bad = !v;
            if (v && !strcmp(v, "none"))
                c.durability = SB_DURABILITY_NONE;
            else if (v && !strcmp(v, "periodic"))
                c.durability = SB_DURABILITY_PERIODIC;
            else if (v && !strcmp(v, "commit"))
                c.durability = SB_DURABILITY_COMMIT;
            else
                bad = 1;
        } else if (!strcmp(a, "--shared")) {
            bad = !v || !(c.shared_seeds = rt_shared_seeds(v, "serve"));
        } else if (!strcmp(a, "--shared-auth")) {
            bad = !v, shared_auth = v;
        } else if (rt_shared_tune_opt(a, v, &tune, &bad)) {
            /* --shared-timeout, -ttl, -publish-mib, -secret-file */
        } else if (!strcmp(a, "--max-sessions")) {
            bad = rt_parse_u64(v, 1, 1u << 24, &x), c.max_sessions = (size_t)x;
        } else if (a[0] != '-' && !c.model) {
            c.model = a, took = 1;
        } else if (llama_server_flag(a)) {
            fprintf(stderr, "snapbank serve: %s is a llama-server option snapbank serve does not "
                            "support (snapbank serve --help lists the llama-server options it "
                            "takes)\n", a);
            return 2;
        } else {
            fprintf(stderr, "snapbank serve: unknown argument '%s'\n\n", a);
            serve_usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "snapbank serve: bad or missing value for %s%s%s\n", a,
                    v ? ": " : "", v ? v : "");
            return 2;
        }
        i += took - 1;
    }
    if (llama_flag && c.engine != SRV_ENGINE_LLAMA) {
        fprintf(stderr, "snapbank serve: %s is llama.cpp's: it needs --engine llama.cpp (the "
                        "builtin engine computes on the CPU, its KV cache in the bank)\n",
                llama_flag);
        return 2;
    }
    if (!c.model) {
        fprintf(stderr, "snapbank serve: need MODEL (a GGUF file)\n\n");
        serve_usage(stderr);
        return 2;
    }
    if ((shared_auth || tune.given) && !c.shared_seeds) {
        fprintf(stderr, "snapbank serve: %s needs --shared\n",
                shared_auth ? "--shared-auth" : tune.given);
        return 2;
    }
    c.shared_timeout_ms = (uint32_t)tune.timeout_ms;
    c.shared_ttl_s = (uint32_t)tune.ttl_s;
    c.shared_publish_bytes_per_s = tune.publish_mib << 20;
    c.shared_secret_file = tune.secret_file;
    rt_auth auth;
    if (shared_auth) {
        if (rt_shared_auth(shared_auth, &auth, "serve"))
            return 1;
        c.shared_user = auth.user[0] ? auth.user : NULL;
        c.shared_password = auth.password[0] ? auth.password : NULL;
    }
    int rc = srv_run(&c);
    if (shared_auth)
        memset(&auth, 0, sizeof auth);
    return rc;
}
