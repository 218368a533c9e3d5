/* bench_tool.h -- `snapbank bench`, the fio-style job runner, as a library
 * the snapbank CLI calls (tools/bench/ holds its job parser, runner, output
 * and plots; it uses the store's public header and the runtime's headers,
 * never the CLI's). */
#ifndef SB_BENCH_TOOL_H
#define SB_BENCH_TOOL_H

/* sb_bench_tool_main -- run `snapbank bench` with its arguments (argv[0] is
 * "bench"). Returns the process exit status: 0 every job ran, 1 a job
 * failed, 2 usage or a bad job file. */
int sb_bench_tool_main(int argc, char **argv);

#endif /* SB_BENCH_TOOL_H */
