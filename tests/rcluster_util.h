/* rcluster_util.h -- a real Redis Cluster on loopback for the tests: N
 * masters with R replicas each, redis-server processes this process starts
 * (in a scratch directory), joins with `redis-cli --cluster create`, waits
 * for, and stops by pid.
 *
 * Nothing here talks to anything but 127.0.0.1. Ports come from a range
 * below the kernel's ephemeral ports, each checked free (and its cluster
 * bus port, +10000) before a server is started on it.
 */
#ifndef SB_RCLUSTER_UTIL_H
#define SB_RCLUSTER_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define TU_CLUSTER_MAX 12

typedef struct tu_cluster {
    int n;                        /* servers */
    int ports[TU_CLUSTER_MAX];
    pid_t pids[TU_CLUSTER_MAX];   /* 0: not running */
    char dir[256];                /* scratch directory, removed at stop */
    char seeds[TU_CLUSTER_MAX * 24]; /* "127.0.0.1:p,..." */
    char extra[512];              /* extra redis-server arguments, space-separated */
} tu_cluster;

/* tu_redis_present -- whether redis-server and redis-cli are installed. */
bool tu_redis_present(void);

/* tu_cluster_suite_start -- the cluster a test suite runs on: 3 masters
 * with a replica each (tu_cluster_start). Without redis-server or
 * redis-cli, a line says `suite` is skipped and *have stays false.
 * Returns 0 (*have says whether the cluster runs), -1 (it did not start). */
int tu_cluster_suite_start(tu_cluster *cl, const char *suite, bool *have);

/* tu_cluster_start -- start masters * (1 + replicas) servers and join them
 * into one cluster; extra (may be NULL) is appended to every server's
 * arguments (e.g. "--requirepass x --masterauth x"). Waits until every
 * node says cluster_state:ok. Returns 0, or -1 (a message on stderr; what
 * was started is stopped). */
int tu_cluster_start(tu_cluster *cl, int masters, int replicas, const char *extra);

/* tu_cluster_stop -- SIGKILL every server still running, reap them, and
 * remove the scratch directory (kept, with the servers' logs, when the
 * environment has SB_KEEP_RC set: for a failure's post-mortem). */
void tu_cluster_stop(tu_cluster *cl);

/* tu_cluster_signal -- send sig to server i (SIGKILL also reaps it and
 * marks it stopped; SIGSTOP / SIGCONT pause and resume it). */
void tu_cluster_signal(tu_cluster *cl, int i, int sig);

/* tu_cluster_restart -- start server i again on its port and directory
 * (its nodes.conf brings it back into the cluster). Returns 0 or -1. */
int tu_cluster_restart(tu_cluster *cl, int i);

/* tu_cluster_wait_ok -- wait until every running, unpaused server reports
 * cluster_state:ok and all slots assigned to a running master (at most
 * timeout_s). Returns 0, or -1 on timeout. */
int tu_cluster_wait_ok(tu_cluster *cl, int timeout_s);

/* tu_cluster_cmd -- run one command (argv style) on server i and return its
 * reply as text in buf (status, string, integer or the first element's
 * text; "(error) ..." for errors). Returns 0 or -1 (no connection). */
int tu_cluster_cmd(tu_cluster *cl, int i, char *buf, size_t cap, int argc, const char **argv);

/* tu_cluster_master_of -- the index of the server that masters slot, or -1. */
int tu_cluster_master_of(tu_cluster *cl, unsigned slot);

/* tu_cluster_node_id -- the 40-hex node id of server i into id[41]. */
int tu_cluster_node_id(tu_cluster *cl, int i, char id[41]);

#endif /* SB_RCLUSTER_UTIL_H */
