/* remote_acl.c -- `snapbank remote-acl --scope S [--user NAME]
 * [--shared-secret-file F]`: print the Redis ACL rule that confines a
 * tenant's user to its scope's pages in the shared tier (the key pattern
 * from sb_shared_key_pattern, the commands the tier sends). Nothing is
 * connected to. Exit status: 0 printed, 1 the secret file was refused, 2
 * usage error. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "snapbank.h"

static void remote_acl_usage(FILE *f)
{
    fprintf(f,
            "usage: snapbank remote-acl [--scope S] [--user NAME] [--shared-secret-file F]\n\n"
            "Prints the ACL rule (one ACL SETUSER command, to run on every node of\n"
            "the cluster) that lets user NAME read and write the shared tier's\n"
            "pages of scope S (--scope of run, chat and serve; default: empty),\n"
            "for every model, and no other key. With the deployment's secret\n"
            "(--shared-secret-file) the pattern is the keyed one the nodes use\n"
            "then. Replace PASSWORD with the user's password (or use #<sha256>).\n\n"
            "The commands allowed: GET, SET, EXISTS, DEL and EVAL (a bad value's\n"
            "replacement) on the pattern, CLUSTER SLOTS, READONLY, ASKING, PING.\n\n"
            "exit status: 0 printed, 1 the secret file was refused, 2 usage.\n");
}

int sb_cli_remote_acl(int argc, char **argv)
{
    const char *scope = "", *user = "tenant", *secret = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            remote_acl_usage(stdout);
            return 0;
        }
        const char **to = !strcmp(a, "--scope")                ? &scope
                          : !strcmp(a, "--user")               ? &user
                          : !strcmp(a, "--shared-secret-file") ? &secret
                                                               : NULL;
        if (!to) {
            fprintf(stderr, "snapbank remote-acl: unknown argument '%s'\n\n", a);
            remote_acl_usage(stderr);
            return 2;
        }
        if (!v) {
            fprintf(stderr, "snapbank remote-acl: %s needs a value\n", a);
            return 2;
        }
        *to = argv[++i];
    }
    if (!user[0] || strpbrk(user, " \t\n")) {
        fprintf(stderr, "snapbank remote-acl: --user: want a name without spaces\n");
        return 2;
    }
    if (strlen(scope) > SB_SCOPE_MAX) {
        fprintf(stderr, "snapbank remote-acl: --scope is longer than %u bytes\n", SB_SCOPE_MAX);
        return 2;
    }
    char pat[SB_SHARED_PATTERN_LEN];
    if (sb_shared_key_pattern(secret, scope, strlen(scope), pat, sizeof pat) != SB_OK)
        return 1;
    printf("ACL SETUSER %s on >PASSWORD resetkeys ~%s resetchannels -@all +get +set +exists "
           "+del +eval +cluster|slots +readonly +asking +ping\n",
           user, pat);
    return 0;
}
