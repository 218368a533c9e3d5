/* rcluster_util.c -- a real Redis Cluster on loopback for the tests (see
 * rcluster_util.h). */
#include "rcluster_util.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

static bool on_path(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[1024];
    if (!path)
        path = "/usr/bin:/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, path, prog);
        if (access(buf, X_OK) == 0)
            return true;
        path += n + (end ? 1 : 0);
    }
    return false;
}

bool tu_redis_present(void)
{
    return on_path("redis-server") && on_path("redis-cli");
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    bool ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Split "a b c" into argv slots (in place in buf). */
static int split_args(char *buf, char **argv, int max)
{
    int n = 0;
    for (char *p = strtok(buf, " "); p && n < max; p = strtok(NULL, " "))
        argv[n++] = p;
    return n;
}

static pid_t spawn_server(tu_cluster *cl, int i)
{
    char port[16], conf[300], logf[300], extra[512], rdb[64];
    snprintf(port, sizeof port, "%d", cl->ports[i]);
    snprintf(conf, sizeof conf, "nodes-%d.conf", cl->ports[i]);
    /* Each server its own RDB file: a replica's full sync lands in a temp
     * file renamed to dbfilename and then loaded, so servers sharing the
     * directory and the default name could load one another's data. */
    snprintf(rdb, sizeof rdb, "dump-%d.rdb", cl->ports[i]);
    snprintf(logf, sizeof logf, "%s/redis-%d.log", cl->dir, cl->ports[i]);
    snprintf(extra, sizeof extra, "%s", cl->extra);
    char *argv[64] = { "redis-server", "--port", port, "--bind", "127.0.0.1",
                       "--cluster-enabled", "yes", "--cluster-config-file", conf,
                       "--cluster-node-timeout", "1000", "--appendonly", "no",
                       "--save", "", "--dir", cl->dir, "--dbfilename", rdb, "--logfile", logf,
                       "--daemonize", "no", "--protected-mode", "no",
                       "--cluster-replica-validity-factor", "0", NULL };
    int argc = 0;
    while (argv[argc])
        argc++;
    argc += split_args(extra, argv + argc, 62 - argc);
    argv[argc] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        execvp("redis-server", argv);
        _exit(127);
    }
    return pid;
}

static redisContext *connect_node(tu_cluster *cl, int i)
{
    struct timeval tv = { 1, 0 };
    redisContext *c = redisConnectWithTimeout("127.0.0.1", cl->ports[i], tv);
    if (!c || c->err) {
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    /* The tests' own servers: authenticate when they need it. */
    const char *pw = strstr(cl->extra, "--requirepass ");
    if (pw) {
        char word[128];
        sscanf(pw + 14, "%127s", word);
        redisReply *r = redisCommand(c, "AUTH %s", word);
        if (r)
            freeReplyObject(r);
    }
    return c;
}

int tu_cluster_cmd(tu_cluster *cl, int i, char *buf, size_t cap, int argc, const char **argv)
{
    redisContext *c = connect_node(cl, i);
    if (!c)
        return -1;
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    if (!r) {
        redisFree(c);
        return -1;
    }
    const redisReply *x = r->type == REDIS_REPLY_ARRAY && r->elements ? r->element[0] : r;
    switch (x->type) {
    case REDIS_REPLY_ERROR:
        snprintf(buf, cap, "(error) %s", x->str);
        break;
    case REDIS_REPLY_INTEGER:
        snprintf(buf, cap, "%lld", x->integer);
        break;
    case REDIS_REPLY_NIL:
        snprintf(buf, cap, "(nil)");
        break;
    default:
        snprintf(buf, cap, "%s", x->str ? x->str : "");
    }
    freeReplyObject(r);
    redisFree(c);
    return 0;
}

static bool node_ok(tu_cluster *cl, int i)
{
    char buf[4096];
    const char *argv[2] = { "CLUSTER", "INFO" };
    if (tu_cluster_cmd(cl, i, buf, sizeof buf, 2, argv) != 0)
        return false;
    return strstr(buf, "cluster_state:ok") && strstr(buf, "cluster_slots_assigned:16384") &&
           strstr(buf, "cluster_slots_ok:16384");
}

int tu_cluster_wait_ok(tu_cluster *cl, int timeout_s)
{
    double end = now_s() + timeout_s;
    while (now_s() < end) {
        bool all = true;
        for (int i = 0; i < cl->n && all; i++)
            if (cl->pids[i] > 0)
                all = node_ok(cl, i);
        /* Every slot's master must be a server that runs. */
        for (unsigned s = 0; s < 16384 && all; s += 97) {
            int m = tu_cluster_master_of(cl, s);
            all = m >= 0 && cl->pids[m] > 0;
        }
        if (all)
            return 0;
        sleep_ms(100);
    }
    return -1;
}

int tu_cluster_master_of(tu_cluster *cl, unsigned slot)
{
    for (int i = 0; i < cl->n; i++) {
        if (cl->pids[i] <= 0)
            continue;
        redisContext *c = connect_node(cl, i);
        if (!c)
            continue;
        redisReply *r = redisCommand(c, "CLUSTER SLOTS");
        int found = -1;
        for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
            redisReply *e = r->element[k];
            if (e->elements >= 3 && (unsigned long long)e->element[0]->integer <= slot &&
                slot <= (unsigned long long)e->element[1]->integer) {
                int port = (int)e->element[2]->element[1]->integer;
                for (int j = 0; j < cl->n; j++)
                    if (cl->ports[j] == port)
                        found = j;
            }
        }
        if (r)
            freeReplyObject(r);
        redisFree(c);
        return found;
    }
    return -1;
}

int tu_cluster_node_id(tu_cluster *cl, int i, char id[41])
{
    char buf[64];
    const char *argv[2] = { "CLUSTER", "MYID" };
    if (tu_cluster_cmd(cl, i, buf, sizeof buf, 2, argv) != 0 || strlen(buf) != 40)
        return -1;
    memcpy(id, buf, 41);
    return 0;
}

static bool wait_ping(tu_cluster *cl, int i, int timeout_s)
{
    double end = now_s() + timeout_s;
    while (now_s() < end) {
        char buf[64];
        const char *argv[1] = { "PING" };
        if (tu_cluster_cmd(cl, i, buf, sizeof buf, 1, argv) == 0 && !strcmp(buf, "PONG"))
            return true;
        int st;
        if (waitpid(cl->pids[i], &st, WNOHANG) == cl->pids[i]) {
            cl->pids[i] = 0;
            return false;
        }
        sleep_ms(20);
    }
    return false;
}

int tu_cluster_suite_start(tu_cluster *cl, const char *suite, bool *have)
{
    *have = false;
    if (!tu_redis_present()) {
        fprintf(stderr, "%s: skipped: redis-server / redis-cli not installed\n", suite);
        return 0;
    }
    *have = tu_cluster_start(cl, 3, 1, NULL) == 0;
    return *have ? 0 : -1;
}

int tu_cluster_start(tu_cluster *cl, int masters, int replicas, const char *extra)
{
    memset(cl, 0, sizeof *cl);
    cl->n = masters * (1 + replicas);
    if (cl->n > TU_CLUSTER_MAX || masters < 3) {
        fprintf(stderr, "tu_cluster_start: %d servers: out of range\n", cl->n);
        return -1;
    }
    snprintf(cl->extra, sizeof cl->extra, "%s", extra ? extra : "");
    snprintf(cl->dir, sizeof cl->dir, "/tmp/snapbank-rc-XXXXXX");
    if (!mkdtemp(cl->dir)) {
        perror("mkdtemp");
        return -1;
    }
    /* Ports: a random start in [15000, 22000), servers on consecutive free
     * ports whose bus ports (+10000) are free too. */
    unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
    int port = 15000 + (int)(rand_r(&seed) % 7000);
    for (int i = 0; i < cl->n; i++) {
        while (port < 22500 && !(port_free(port) && port_free(port + 10000)))
            port++;
        if (port >= 22500) {
            fprintf(stderr, "tu_cluster_start: no free ports\n");
            tu_cluster_stop(cl);
            return -1;
        }
        cl->ports[i] = port++;
    }
    size_t off = 0;
    for (int i = 0; i < cl->n; i++) {
        off += (size_t)snprintf(cl->seeds + off, sizeof cl->seeds - off, "%s127.0.0.1:%d",
                                i ? "," : "", cl->ports[i]);
        cl->pids[i] = spawn_server(cl, i);
    }
    for (int i = 0; i < cl->n; i++)
        if (cl->pids[i] <= 0 || !wait_ping(cl, i, 20)) {
            fprintf(stderr, "tu_cluster_start: redis-server on port %d did not start (log in %s)\n",
                    cl->ports[i], cl->dir);
            tu_cluster_stop(cl);
            return -1;
        }
    /* redis-cli --cluster create, quietly. */
    char reps[8];
    snprintf(reps, sizeof reps, "%d", replicas);
    char addr[TU_CLUSTER_MAX][24];
    const char *argv[TU_CLUSTER_MAX + 10];
    int argc = 0;
    argv[argc++] = "redis-cli";
    const char *pw = strstr(cl->extra, "--requirepass ");
    char pwword[128];
    if (pw) {
        sscanf(pw + 14, "%127s", pwword);
        argv[argc++] = "-a";
        argv[argc++] = pwword;
        argv[argc++] = "--no-auth-warning";
    }
    argv[argc++] = "--cluster";
    argv[argc++] = "create";
    for (int i = 0; i < cl->n; i++) {
        snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d", cl->ports[i]);
        argv[argc++] = addr[i];
    }
    argv[argc++] = "--cluster-replicas";
    argv[argc++] = reps;
    argv[argc++] = "--cluster-yes";
    argv[argc] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        execvp("redis-cli", (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "tu_cluster_start: redis-cli --cluster create failed (status %d)\n", st);
        tu_cluster_stop(cl);
        return -1;
    }
    if (tu_cluster_wait_ok(cl, 60) != 0) {
        fprintf(stderr, "tu_cluster_start: the cluster did not become ok\n");
        tu_cluster_stop(cl);
        return -1;
    }
    return 0;
}

int tu_cluster_restart(tu_cluster *cl, int i)
{
    if (cl->pids[i] > 0)
        return 0;
    cl->pids[i] = spawn_server(cl, i);
    return cl->pids[i] > 0 && wait_ping(cl, i, 20) ? 0 : -1;
}

void tu_cluster_signal(tu_cluster *cl, int i, int sig)
{
    if (cl->pids[i] <= 0)
        return;
    kill(cl->pids[i], sig);
    if (sig == SIGKILL || sig == SIGTERM) {
        if (sig == SIGTERM)
            kill(cl->pids[i], SIGCONT);
        waitpid(cl->pids[i], NULL, 0);
        cl->pids[i] = 0;
    }
}

static void remove_dir(const char *dir)
{
    pid_t pid = fork();
    if (pid == 0) {
        execlp("rm", "rm", "-rf", dir, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
}

void tu_cluster_stop(tu_cluster *cl)
{
    for (int i = 0; i < cl->n; i++)
        tu_cluster_signal(cl, i, SIGKILL);
    if (cl->dir[0] && strncmp(cl->dir, "/tmp/snapbank-rc-", 17) == 0 && !getenv("SB_KEEP_RC"))
        remove_dir(cl->dir);
    cl->dir[0] = 0;
}
