/* cli.h -- the snapbank command line: one binary, one function per
 * subcommand. Each returns the process exit status (0 ok, 1 failure,
 * 2 usage error). */
#ifndef SB_CLI_H
#define SB_CLI_H

int sb_cli_demo(int argc, char **argv);
int sb_cli_bank_demo(int argc, char **argv);
int sb_cli_fsck(int argc, char **argv);
int sb_cli_stat(int argc, char **argv);
int sb_cli_run(int argc, char **argv);
int sb_cli_chat(int argc, char **argv);
int sb_cli_make_model(int argc, char **argv);
int sb_cli_tokenize(int argc, char **argv);
int sb_cli_serve(int argc, char **argv);
int sb_cli_remote_acl(int argc, char **argv);

#endif /* SB_CLI_H */
