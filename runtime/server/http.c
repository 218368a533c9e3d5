/* http.c -- the HTTP layer over libmicrohttpd (http.h). */
#define _GNU_SOURCE /* accept4 */
#include "server/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received */
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "snapbank.h"

#define STREAM_BLOCK 16384 /* bytes MHD asks a stream for at a time */

/* A connection as the guard sees it (MHD's socket context). From accept
 * until its request header is whole, and again from the end of each
 * response until the next header is whole, it is "waiting": on the
 * guard's list, oldest first. */
typedef struct guard_conn {
    struct guard_conn *prev, *next; /* the waiting list, under guard_mu */
    MHD_socket fd;                  /* MHD's; valid until NOTIFY_CLOSED */
    double deadline;                /* monotonic seconds: the header is due */
    bool waiting;                   /* on the list */
    bool cut;                       /* shut down by the guard */
    uint64_t rx_mark;               /* bytes received when it began waiting */
    unsigned char ip[17];           /* its address (family, 16 bytes), counted
                                       in the per-address table */
    bool ip_counted;
} guard_conn;

/* A connection the front holds until its request line is whole. */
typedef struct held {
    struct held *prev, *next;       /* oldest first: deadlines ascend */
    int fd;
    struct sockaddr_storage sa;
    socklen_t salen;
    unsigned char ip[17];
    double deadline;                /* monotonic: the request line is due */
} held;

/* Connections of one address (front and MHD's together). */
typedef struct ip_count {
    unsigned char ip[17];
    unsigned n;
} ip_count;

struct srv_http {
    struct MHD_Daemon *d;
    srv_handler_fn handler;
    srv_status_fn status;
    void *app;
    size_t max_body;
    unsigned port;
    /* the front: our listening socket, and connections not yet handed to MHD
     * (the front thread's alone) */
    int lfd;                       /* -1 once quiesced */
    int efd, wake_fd;              /* epoll; eventfd that wakes the front */
    pthread_t front;
    bool front_on;
    atomic_int front_quiesce, front_stop;
    held *held_head, *held_tail;
    size_t n_held;
    unsigned max_per_ip;           /* 0: no limit */
    ip_count *ips;                 /* (n_ips) under guard_mu */
    size_t n_ips, cap_ips;
    int handoff_fd;                /* under guard_mu: the socket being handed */
    double handoff_deadline;       /* to MHD, and its header deadline */
    atomic_ullong cut_per_ip, bad_line;
    atomic_size_t open;    /* requests begun and not closed */
    atomic_int started;    /* MHD's own log lines go to stderr until then */
    /* the guard: header deadlines and room for new clients */
    pthread_mutex_t guard_mu;
    pthread_cond_t guard_cv;       /* the reaper's sleep (CLOCK_MONOTONIC) */
    pthread_t reaper;
    bool reaper_on, guard_stop;    /* under guard_mu */
    guard_conn *wait_head, *wait_tail; /* waiting connections, oldest first */
    size_t n_waiting;
    size_t waiting_cap;            /* more waiting than this: the oldest goes */
    double header_timeout;         /* seconds */
    atomic_ullong cut_timeout, cut_room; /* connections the guard closed */
};

enum { REQ_NEW = 0, REQ_HANDLED = 1 };

struct srv_hreq {
    srv_http *h;
    struct MHD_Connection *conn;
    char method[16];
    char *path;
    char *body;
    size_t len, cap;
    int state;
    const char *route;
    struct MHD_Response *resp;   /* the answer, queued when the callback returns */
    unsigned status;
    srv_link *link;              /* waiting: poll under link->mu after each wake */
    srv_poll_fn poll;
    void *poll_ctx;
    void (*on_close)(void *ctx, bool aborted);
    void *close_ctx;
    char *extra[2 * SRV_HREQ_EXTRA]; /* headers for every answer: name, value (owned) */
    size_t n_extra;                  /* pairs */
};

typedef struct stream {
    struct MHD_Connection *conn;
    srv_link *link;
    srv_read_fn read;
    void (*release)(void *ctx);
    void *ctx;
} stream;

/* ---- responses --------------------------------------------------------------------- */

static void add_headers(struct MHD_Response *resp, const char *const *headers)
{
    for (size_t i = 0; headers && headers[i] && headers[i + 1]; i += 2)
        MHD_add_response_header(resp, headers[i], headers[i + 1]);
}

void srv_hreq_respond(srv_hreq *r, unsigned status, const char *ctype, const char *body,
                      size_t len, const char *const *headers)
{
    if (r->resp) /* one answer per request: the first stands */
        return;
    r->resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r->resp)
        return;
    r->status = status;
    if (ctype)
        MHD_add_response_header(r->resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    add_headers(r->resp, headers);
}

void srv_hreq_json(srv_hreq *r, unsigned status, json_t *j, const char *const *headers)
{
    char *s = j ? json_dumps(j, SRV_JSON_FLAGS) : NULL;
    json_decref(j);
    if (!s) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
                                  "\"server_error\",\"param\":null,\"code\":null}}";
        srv_hreq_respond(r, 500, "application/json", oom, sizeof oom - 1, NULL);
        return;
    }
    size_t n = strlen(s);
    s[n] = '\n'; /* a line, for curl users; the NUL moves past it */
    char *t = realloc(s, n + 2);
    if (t) {
        s = t;
        s[n + 1] = 0;
        n++;
    } else {
        s[n] = 0;
    }
    srv_hreq_respond(r, status, "application/json", s, n, headers);
    free(s);
}

void srv_hreq_error(srv_hreq *r, unsigned status, const char *type, const char *code,
                    const char *param, const char *const *headers, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *e = json_pack("{s:{s:s, s:s, s:o, s:o}}", "error", "message", msg, "type", type,
                          "param", param ? json_string(param) : json_null(), "code",
                          code ? json_string(code) : json_null());
    srv_hreq_json(r, status, e, headers);
}

/* ---- waiting and streaming --------------------------------------------------------- */

void srv_link_wake(srv_link *l)
{
    if (l->parked) {
        l->parked = false;
        MHD_resume_connection(l->conn);
    }
}

void srv_hreq_wait(srv_hreq *r, srv_link *link, srv_poll_fn poll, void *ctx)
{
    r->link = link, r->poll = poll, r->poll_ctx = ctx;
}

static ssize_t on_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream *s = cls;
    pthread_mutex_lock(s->link->mu);
    ssize_t n = s->read(s->ctx, buf, max);
    if (n == 0) {
        s->link->conn = s->conn;
        s->link->parked = true;
        MHD_suspend_connection(s->conn);
    }
    pthread_mutex_unlock(s->link->mu);
    return n == SRV_READ_END     ? MHD_CONTENT_READER_END_OF_STREAM
           : n == SRV_READ_ERROR ? MHD_CONTENT_READER_END_WITH_ERROR
                                 : n;
}

static void on_stream_free(void *cls)
{
    stream *s = cls;
    if (s->release)
        s->release(s->ctx);
    free(s);
}

void srv_hreq_stream(srv_hreq *r, srv_link *link, srv_read_fn read, void (*release)(void *ctx),
                     void *ctx)
{
    stream *s = r->resp ? NULL : calloc(1, sizeof *s);
    if (!s) {
        if (release)
            release(ctx);
        return;
    }
    *s = (stream){ r->conn, link, read, release, ctx };
    r->resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, on_read, s,
                                                on_stream_free);
    if (!r->resp) {
        on_stream_free(s);
        return;
    }
    r->status = 200;
    MHD_add_response_header(r->resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r->resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r->resp, "X-Accel-Buffering", "no");
}

void srv_hreq_add_header(srv_hreq *r, const char *name, const char *value)
{
    if (r->n_extra >= SRV_HREQ_EXTRA)
        return;
    char *n = strdup(name), *v = strdup(value);
    if (!n || !v) {
        free(n);
        free(v);
        return;
    }
    r->extra[2 * r->n_extra] = n, r->extra[2 * r->n_extra + 1] = v;
    r->n_extra++;
}

void srv_hreq_on_close(srv_hreq *r, void (*fn)(void *ctx, bool aborted), void *ctx)
{
    r->on_close = fn, r->close_ctx = ctx;
}

/* ---- accessors --------------------------------------------------------------------- */

const char *srv_hreq_method(const srv_hreq *r)
{
    return r->method;
}

const char *srv_hreq_path(const srv_hreq *r)
{
    return r->path;
}

const char *srv_hreq_header(const srv_hreq *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *srv_hreq_body(const srv_hreq *r, size_t *len)
{
    *len = r->len;
    return r->body ? r->body : "";
}

void srv_hreq_set_route(srv_hreq *r, const char *route)
{
    r->route = route;
}

/* ---- the guard: header deadline, room for new clients -------------------------------

   Hardened servers do not let a connection that has not asked anything hold
   a place for long. Here:
     1. a connection's whole request header must arrive within
        header_timeout of its accept, or of the end of its previous response
        (a kept-alive connection waiting for its next request): a client
        that sends nothing, or dribbles, is cut when that time is up;
     2. at most waiting_cap connections may be waiting for their header at
        once (a quarter of the connection table is kept for connections
        that have sent their request): a new one past the cap cuts the
        oldest waiting one, so a flood of silent sockets cannot lock a new
        client out;
     3. cutting is shutdown(2) of MHD's socket under guard_mu: MHD then
        reads the end and closes the connection itself. MHD tells us a
        connection closed (NOTIFY_CLOSED, which takes it off the list under
        guard_mu) before it closes the socket, so the descriptor shut down
        is always the connection's own. A connection cut in step 1 after
        its client sent part of a request (TCP_INFO's bytes received grew
        since it began waiting, and the client has not closed) is first
        told why: 408 and an error object, written to the socket (MHD
        writes nothing while it reads a header).
   A connection is first held by the front (below) until its request line
   is whole, under the same deadline and cap; the guard then watches it in
   MHD with what is left of its deadline. */

static void ip_key(const struct sockaddr *sa, unsigned char out[17]);
static bool ip_add(srv_http *h, const unsigned char ip[17], bool limit);
static void ip_del(srv_http *h, const unsigned char ip[17]);

static double mono_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void wait_unlink(srv_http *h, guard_conn *g)
{
    if (!g->waiting)
        return;
    if (g->prev)
        g->prev->next = g->next;
    else
        h->wait_head = g->next;
    if (g->next)
        g->next->prev = g->prev;
    else
        h->wait_tail = g->prev;
    g->prev = g->next = NULL;
    g->waiting = false;
    h->n_waiting--;
}

/* Bytes the kernel has received on fd since the accept (0 when unknown). */
static uint64_t rx_bytes(MHD_socket fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received)
        return 0;
    return ti.tcpi_bytes_received;
}

/* Whether the waiting g's client sent bytes since it began waiting and is
 * still there (nothing unread, no end read): MHD took them and found no
 * request in them. */
static bool sent_and_waits(const guard_conn *g)
{
    char b;
    ssize_t n = recv(g->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && rx_bytes(g->fd) > g->rx_mark;
}

/* A last answer written straight to the socket before it closes: status
 * line and an OpenAI error object (best effort, never blocks). */
static void guard_answer(MHD_socket fd, const char *status, const char *code, const char *msg)
{
    char body[512], all[1024];
    int nb = snprintf(body, sizeof body, "{\"error\":{\"message\":\"%s\",\"type\":"
                      "\"invalid_request_error\",\"param\":null,\"code\":\"%s\"}}\n", msg,
                      code);
    int n = snprintf(all, sizeof all, "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %d\r\nConnection: close\r\n\r\n%s", status, nb, body);
    if (nb > 0 && n > 0 && (size_t)n < sizeof all)
        (void)!send(fd, all, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Put g at the list's tail with a fresh deadline (guard_mu held). */
static void wait_link(srv_http *h, guard_conn *g)
{
    wait_unlink(h, g);
    if (g->cut)
        return;
    g->rx_mark = rx_bytes(g->fd);
    g->deadline = mono_now() + h->header_timeout;
    g->prev = h->wait_tail;
    if (h->wait_tail)
        h->wait_tail->next = g;
    else
        h->wait_head = g;
    h->wait_tail = g;
    g->waiting = true;
    h->n_waiting++;
    pthread_cond_signal(&h->guard_cv);
}

/* Step 3: cut g (guard_mu held). */
static void guard_cut(srv_http *h, guard_conn *g, atomic_ullong *count)
{
    wait_unlink(h, g);
    g->cut = true;
    shutdown(g->fd, SHUT_RDWR);
    atomic_fetch_add(count, 1);
}

static guard_conn *guard_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
    srv_http *h = cls;
    guard_conn *g = *socket_ctx;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (!g)
            return;
        pthread_mutex_lock(&h->guard_mu);
        wait_unlink(h, g);
        if (g->ip_counted)
            ip_del(h, g->ip);
        pthread_mutex_unlock(&h->guard_mu);
        free(g);
        *socket_ctx = NULL;
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || !(g = calloc(1, sizeof *g)))
        return; /* unguarded: MHD's idle timeout still holds it */
    g->fd = ci->connect_fd;
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    pthread_mutex_lock(&h->guard_mu);
    if (ai && ai->client_addr) {
        ip_key(ai->client_addr, g->ip);
        g->ip_counted = ip_add(h, g->ip, false);
    }
    wait_link(h, g); /* step 1 */
    g->rx_mark = 0;  /* what came before the accept counts too */
    if (g->fd == h->handoff_fd) /* the front's deadline goes on */
        g->deadline = h->handoff_deadline;
    if (h->n_waiting > h->waiting_cap && h->wait_head != g) /* step 2 */
        guard_cut(h, h->wait_head, &h->cut_room);
    pthread_mutex_unlock(&h->guard_mu);
    *socket_ctx = g;
}

/* The reaper thread: step 1's deadlines. */
static void *reaper_main(void *arg)
{
    srv_http *h = arg;
    pthread_mutex_lock(&h->guard_mu);
    while (!h->guard_stop) {
        double now = mono_now(), until = now + 1.0;
        /* the whole list: a connection the front handed over keeps its
         * earlier deadline, so deadlines only nearly ascend */
        for (guard_conn *g = h->wait_head, *next; g; g = next) {
            next = g->next;
            if (g->deadline > now) {
                until = g->deadline < until ? g->deadline : until;
                continue;
            }
            if (sent_and_waits(g)) /* a part of a request came: say why */
                guard_answer(g->fd, "408 Request Timeout", "request_timeout",
                             "The request header did not arrive whole in time "
                             "(--header-timeout).");
            guard_cut(h, g, &h->cut_timeout);
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double add = until - now + 0.001;
        ts.tv_sec += (time_t)add;
        ts.tv_nsec += (long)((add - (double)(time_t)add) * 1e9);
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&h->guard_cv, &h->guard_mu, &ts);
    }
    pthread_mutex_unlock(&h->guard_mu);
    return NULL;
}

void srv_http_guard_counts(srv_http *h, srv_http_counts *c)
{
    c->header_timeout = atomic_load(&h->cut_timeout);
    c->room = atomic_load(&h->cut_room);
    c->per_ip = atomic_load(&h->cut_per_ip);
    c->bad_request_line = atomic_load(&h->bad_line);
}

/* ---- the front: request lines before MHD --------------------------------------------

   libmicrohttpd 0.9.75 closes a connection whose request line it cannot
   split without a word, and counts a connection against its limits only
   once it has it. So the server listens itself, and a front thread holds
   each new connection (not reading: peeking) until its first line is in:
     1. a line that is not METHOD SP TARGET SP HTTP/D.D is answered 400 with
        an error object and closed (as is a first line over 8 KiB);
     2. a whole line: the connection goes to MHD (MHD_add_connection), whose
        header deadline is what was left of the front's;
     3. a connection that sends no whole line within header_timeout is
        closed (408 first when part of a line came); one that closes is
        dropped;
     4. at most waiting_cap connections are held: a new one past it closes
        the oldest held (room for new clients);
     5. at most max_per_ip connections of one address, held here or open in
        MHD (counted in ips under guard_mu: the front adds at accept and
        removes at hand-off, the guard adds when MHD starts a connection and
        removes when it closes it): more are closed at once. */

/* An address's key: family, then the IPv4 or IPv6 address (port left out). */
static void ip_key(const struct sockaddr *sa, unsigned char out[17])
{
    memset(out, 0, 17);
    out[0] = (unsigned char)sa->sa_family;
    if (sa->sa_family == AF_INET)
        memcpy(out + 1, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    else if (sa->sa_family == AF_INET6)
        memcpy(out + 1, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
}

/* Count one more connection of ip (guard_mu held); with limit, refuse
 * (false) when the address has that many. */
static bool ip_add(srv_http *h, const unsigned char ip[17], bool limit)
{
    for (size_t i = 0; i < h->n_ips; i++)
        if (!memcmp(h->ips[i].ip, ip, 17)) {
            if (limit && h->max_per_ip && h->ips[i].n >= h->max_per_ip)
                return false;
            h->ips[i].n++;
            return true;
        }
    if (h->n_ips == h->cap_ips) {
        size_t cap = h->cap_ips ? 2 * h->cap_ips : 64;
        ip_count *n = realloc(h->ips, cap * sizeof *n);
        if (!n)
            return !limit; /* out of memory: refuse a new one rather than miscount */
        h->ips = n, h->cap_ips = cap;
    }
    memcpy(h->ips[h->n_ips].ip, ip, 17);
    h->ips[h->n_ips++].n = 1;
    return true;
}

static void ip_del(srv_http *h, const unsigned char ip[17])
{
    for (size_t i = 0; i < h->n_ips; i++)
        if (!memcmp(h->ips[i].ip, ip, 17)) {
            if (--h->ips[i].n == 0)
                h->ips[i] = h->ips[--h->n_ips];
            return;
        }
}

static void held_unlink(srv_http *h, held *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        h->held_head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        h->held_tail = e->prev;
    h->n_held--;
}

/* Drop a held connection: uncount, close, free. */
static void held_close(srv_http *h, held *e)
{
    held_unlink(h, e);
    epoll_ctl(h->efd, EPOLL_CTL_DEL, e->fd, NULL);
    pthread_mutex_lock(&h->guard_mu);
    ip_del(h, e->ip);
    pthread_mutex_unlock(&h->guard_mu);
    close(e->fd);
    free(e);
}

static bool tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Step 1: whether line (len bytes, no newline) is METHOD SP TARGET SP
 * HTTP/D.D, with an optional CR at its end. */
static bool request_line_ok(const char *line, size_t len)
{
    if (len && line[len - 1] == '\r')
        len--;
    size_t i = 0;
    while (i < len && tchar((unsigned char)line[i]))
        i++;
    if (i == 0 || i >= len || line[i] != ' ')
        return false;
    size_t t = ++i;
    while (i < len && (unsigned char)line[i] > 0x20 && (unsigned char)line[i] < 0x7f)
        i++;
    if (i == t || i >= len || line[i] != ' ')
        return false;
    i++;
    return len - i == 8 && !memcmp(line + i, "HTTP/", 5) && line[i + 5] >= '0' &&
           line[i + 5] <= '9' && line[i + 6] == '.' && line[i + 7] >= '0' && line[i + 7] <= '9';
}

/* Steps 1-3 for a held connection that may have bytes. */
static void held_examine(srv_http *h, held *e)
{
    char buf[8192];
    ssize_t n = recv(e->fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) { /* the client left */
        held_close(h, e);
        return;
    }
    size_t skip = 0; /* RFC 9112 2.2: empty lines before a request are ignored */
    while (skip < (size_t)n && (buf[skip] == '\r' || buf[skip] == '\n'))
        skip++;
    char *nl = memchr(buf + skip, '\n', (size_t)n - skip);
    if (!nl) {
        if ((size_t)n < sizeof buf)
            return; /* not whole yet */
        guard_answer(e->fd, "400 Bad Request", "invalid_request_line",
                     "The request line is longer than 8 KiB.");
        atomic_fetch_add(&h->bad_line, 1);
        held_close(h, e);
        return;
    }
    if (!request_line_ok(buf + skip, (size_t)(nl - buf) - skip)) {
        guard_answer(e->fd, "400 Bad Request", "invalid_request_line",
                     "The request line is not METHOD TARGET HTTP/1.1.");
        atomic_fetch_add(&h->bad_line, 1);
        held_close(h, e);
        return;
    }
    /* step 2 */
    held_unlink(h, e);
    epoll_ctl(h->efd, EPOLL_CTL_DEL, e->fd, NULL);
    pthread_mutex_lock(&h->guard_mu);
    ip_del(h, e->ip); /* the guard counts it again when MHD starts it */
    h->handoff_fd = e->fd, h->handoff_deadline = e->deadline;
    pthread_mutex_unlock(&h->guard_mu);
    MHD_add_connection(h->d, e->fd, (const struct sockaddr *)&e->sa, e->salen); /* closes
                                                                           it on failure */
    pthread_mutex_lock(&h->guard_mu);
    h->handoff_fd = -1;
    pthread_mutex_unlock(&h->guard_mu);
    free(e);
}

/* Accept what waits on the listening socket (steps 4 and 5). */
static void front_accept(srv_http *h)
{
    for (;;) {
        held *e = calloc(1, sizeof *e);
        if (!e)
            return;
        e->salen = sizeof e->sa;
        e->fd = accept4(h->lfd, (struct sockaddr *)&e->sa, &e->salen,
                        SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (e->fd < 0) {
            free(e);
            return; /* EAGAIN, or out of descriptors: try at the next event */
        }
        ip_key((struct sockaddr *)&e->sa, e->ip);
        pthread_mutex_lock(&h->guard_mu);
        bool ok = ip_add(h, e->ip, true);
        pthread_mutex_unlock(&h->guard_mu);
        if (!ok) { /* step 5 */
            close(e->fd);
            free(e);
            atomic_fetch_add(&h->cut_per_ip, 1);
            continue;
        }
        if (h->n_held >= h->waiting_cap && h->held_head) { /* step 4 */
            held_close(h, h->held_head);
            atomic_fetch_add(&h->cut_room, 1);
        }
        e->deadline = mono_now() + h->header_timeout;
        e->prev = h->held_tail;
        if (h->held_tail)
            h->held_tail->next = e;
        else
            h->held_head = e;
        h->held_tail = e;
        h->n_held++;
        struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = e };
        if (epoll_ctl(h->efd, EPOLL_CTL_ADD, e->fd, &ev) != 0)
            held_close(h, e);
    }
}

static void *front_main(void *arg)
{
    srv_http *h = arg;
    struct epoll_event evs[64];
    while (!atomic_load(&h->front_stop)) {
        if (atomic_load(&h->front_quiesce) && h->lfd >= 0) {
            epoll_ctl(h->efd, EPOLL_CTL_DEL, h->lfd, NULL);
            close(h->lfd);
            h->lfd = -1;
        }
        double now = mono_now();
        while (h->held_head && h->held_head->deadline <= now) { /* step 3 */
            char b;
            if (recv(h->held_head->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0)
                guard_answer(h->held_head->fd, "408 Request Timeout", "request_timeout",
                             "The request header did not arrive whole in time "
                             "(--header-timeout).");
            held_close(h, h->held_head);
            atomic_fetch_add(&h->cut_timeout, 1);
        }
        int ms = h->held_head ? (int)((h->held_head->deadline - now) * 1e3) + 1 : 1000;
        int n = epoll_wait(h->efd, evs, 64, ms);
        bool accept_now = false;
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == &h->lfd) {
                accept_now = true;
            } else if (evs[i].data.ptr == &h->wake_fd) {
                uint64_t v;
                (void)!read(h->wake_fd, &v, sizeof v);
            } else {
                held_examine(h, evs[i].data.ptr);
            }
        }
        /* after the batch: an accept may close a held connection (step 4)
         * whose event is still in it */
        if (accept_now && h->lfd >= 0 && !atomic_load(&h->front_quiesce))
            front_accept(h);
    }
    while (h->held_head)
        held_close(h, h->held_head);
    return NULL;
}

static void front_wake(srv_http *h)
{
    uint64_t one = 1;
    if (h->wake_fd >= 0)
        (void)!write(h->wake_fd, &one, sizeof one);
}

/* ---- the MHD callbacks ------------------------------------------------------------- */

/* Whether the client of a waiting request has gone: its socket reads as
 * closed (EOF) or broken. Peeked, not read: a pipelined next request's
 * bytes stay for MHD. A client that only half-closed its side after the
 * request reads as gone too; MHD itself treats that EOF the same way. */
static bool client_gone(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return false;
    char b;
    ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Queue the answer the handler or poll left in r. */
static enum MHD_Result send_answer(srv_hreq *r)
{
    if (!r->resp)
        srv_hreq_error(r, 500, "server_error", NULL, NULL, NULL,
                       "the server produced no response");
    if (!r->resp)
        return MHD_NO;
    for (size_t i = 0; i < r->n_extra; i++)
        MHD_add_response_header(r->resp, r->extra[2 * i], r->extra[2 * i + 1]);
    enum MHD_Result ret = MHD_queue_response(r->conn, r->status, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    if (r->h->status)
        r->h->status(r->h->app, r->route ? r->route : "other", r->status);
    return ret;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version,
                                 const char *upload, size_t *upload_size, void **req_cls)
{
    srv_http *h = cls;
    srv_hreq *r = *req_cls;
    if (!r) { /* the headers are in */
        r = calloc(1, sizeof *r);
        if (!r || !(r->path = strdup(url))) {
            free(r);
            return MHD_NO;
        }
        r->h = h, r->conn = conn;
        guard_conn *g = guard_of(conn);
        if (g) { /* the header is in: no longer waiting */
            pthread_mutex_lock(&h->guard_mu);
            wait_unlink(h, g);
            pthread_mutex_unlock(&h->guard_mu);
        }
        snprintf(r->method, sizeof r->method, "%s", method);
        atomic_fetch_add(&h->open, 1);
        *req_cls = r;
        /* RFC 9112 3.2: an HTTP/1.1 request without Host is answered 400 */
        if (!strcmp(version, MHD_HTTP_VERSION_1_1) &&
            !MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST)) {
            r->state = REQ_HANDLED;
            srv_hreq_error(r, 400, "invalid_request_error", "missing_host", NULL, NULL,
                           "An HTTP/1.1 request needs a Host header (RFC 9112).");
            return send_answer(r);
        }
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > h->max_body) {
            r->state = REQ_HANDLED;
            srv_hreq_error(r, 413, "invalid_request_error", "request_too_large", NULL, NULL,
                           "the request body (%s bytes) is over the server's limit of %zu "
                           "bytes (--max-body-bytes)", cl, h->max_body);
            return send_answer(r);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (r->state != REQ_NEW) { /* answered already: drop the rest */
            *upload_size = 0;
            return MHD_YES;
        }
        if (r->len + *upload_size > h->max_body)
            return MHD_NO; /* a chunked body over the limit: close */
        if (r->len + *upload_size + 1 > r->cap) {
            size_t cap = r->cap ? r->cap : 4096;
            while (cap < r->len + *upload_size + 1)
                cap *= 2;
            char *nb = realloc(r->body, cap);
            if (!nb)
                return MHD_NO;
            r->body = nb, r->cap = cap;
        }
        memcpy(r->body + r->len, upload, *upload_size);
        r->len += *upload_size;
        r->body[r->len] = 0;
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->state == REQ_NEW) {
        r->state = REQ_HANDLED;
        h->handler(h->app, r);
    }
    if (r->poll) { /* waiting: poll, under the producer's lock */
        if (client_gone(conn))
            return MHD_NO; /* closed: on_completed tells the app it was aborted */
        pthread_mutex_lock(r->link->mu);
        bool done = r->poll(r->poll_ctx, r);
        if (!done) {
            r->link->conn = conn;
            r->link->parked = true;
            MHD_suspend_connection(conn);
        }
        pthread_mutex_unlock(r->link->mu);
        if (!done)
            return MHD_YES;
        r->poll = NULL;
    }
    return send_answer(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    srv_http *h = cls;
    srv_hreq *r = *req_cls;
    if (!r)
        return;
    *req_cls = NULL;
    guard_conn *g = guard_of(conn);
    if (g && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK) { /* kept alive: waits again */
        pthread_mutex_lock(&h->guard_mu);
        wait_link(h, g);
        pthread_mutex_unlock(&h->guard_mu);
    }
    if (r->on_close)
        r->on_close(r->close_ctx, toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
    if (r->resp)
        MHD_destroy_response(r->resp);
    for (size_t i = 0; i < 2 * r->n_extra; i++)
        free(r->extra[i]);
    free(r->body);
    free(r->path);
    free(r);
    atomic_fetch_sub(&h->open, 1);
}

/* libmicrohttpd's format strings come from the library, so the format is
 * not a literal here; say so to the compiler. */
__attribute__((format(printf, 2, 0)))
static void on_log(void *cls, const char *fmt, va_list ap)
{
    srv_http *h = cls;
    if (atomic_load(&h->started))
        return; /* a client that went away, and the like: not for the log */
    fputs("snapbank serve: http: ", stderr);
    vfprintf(stderr, fmt, ap);
}

/* ---- the daemon -------------------------------------------------------------------- */

/* Stop the reaper and free h (MHD stopped: every connection closed). */
static void guard_free(srv_http *h)
{
    if (h->reaper_on) {
        pthread_mutex_lock(&h->guard_mu);
        h->guard_stop = true;
        pthread_cond_signal(&h->guard_cv);
        pthread_mutex_unlock(&h->guard_mu);
        pthread_join(h->reaper, NULL);
    }
    pthread_cond_destroy(&h->guard_cv);
    pthread_mutex_destroy(&h->guard_mu);
    free(h->ips);
    free(h);
}

int srv_http_start(const srv_http_cfg *cfg, srv_handler_fn handler, srv_status_fn status,
                   void *app, srv_http **out, sb_rt_err *err)
{
    *out = NULL;
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE }, *ai = NULL;
    int gai = getaddrinfo(cfg->host, NULL, &hints, &ai);
    if (gai != 0 || !ai)
        return sb_rt_fail(err, SB_ERR_INVAL, "--host %s: not an address: %s", cfg->host,
                          gai_strerror(gai));
    struct sockaddr_storage sa;
    memset(&sa, 0, sizeof sa);
    memcpy(&sa, ai->ai_addr, ai->ai_addrlen);
    int v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    if (v6)
        ((struct sockaddr_in6 *)&sa)->sin6_port = htons((uint16_t)cfg->port);
    else
        ((struct sockaddr_in *)&sa)->sin_port = htons((uint16_t)cfg->port);
    srv_http *h = calloc(1, sizeof *h);
    if (!h)
        return sb_rt_fail(err, SB_ERR_NOMEM, "out of memory");
    h->handler = handler, h->status = status, h->app = app, h->max_body = cfg->max_body;
    h->lfd = h->efd = h->wake_fd = h->handoff_fd = -1;
    h->max_per_ip = cfg->max_per_ip;
    h->header_timeout = cfg->header_timeout_s;
    unsigned keep = cfg->max_conns / 4; /* step 2: room kept for requests */
    h->waiting_cap = cfg->max_conns - (keep ? keep : 1);
    if (h->waiting_cap < 1)
        h->waiting_cap = 1;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->guard_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&h->guard_mu, NULL);
    if (pthread_create(&h->reaper, NULL, reaper_main, h) != 0) {
        pthread_cond_destroy(&h->guard_cv);
        pthread_mutex_destroy(&h->guard_mu);
        free(h);
        return sb_rt_fail(err, SB_ERR_NOMEM, "cannot start the connection guard's thread");
    }
    h->reaper_on = true;
    /* our listening socket (the front's) */
    socklen_t salen = v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    int one = 1;
    h->lfd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (h->lfd < 0 || setsockopt(h->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(h->lfd, (struct sockaddr *)&sa, salen) != 0 || listen(h->lfd, 511) != 0) {
        if (h->lfd >= 0)
            close(h->lfd);
        h->lfd = -1;
        guard_free(h);
        return sb_rt_fail(err, SB_ERR_IO, "cannot listen on %s port %u (in use, or not an "
                          "address of this machine)", cfg->host, cfg->port);
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (getsockname(h->lfd, (struct sockaddr *)&bound, &blen) == 0)
        h->port = ntohs(v6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                           : ((struct sockaddr_in *)&bound)->sin_port);
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                     MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
    if (v6)
        flags |= MHD_USE_IPv6;
    /* The caller's handle is set before any thread starts, so a handler
     * that reads it (through the application) is ordered after the write;
     * every failure below clears it again. */
    *out = h;
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_access, h,
                            MHD_OPTION_EXTERNAL_LOGGER, on_log, h,
                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->threads,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_conns,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->timeout_s,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64u << 10),
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                            MHD_OPTION_END);
    if (!h->d) {
        *out = NULL;
        srv_http_stop(h);
        return sb_rt_fail(err, SB_ERR_IO, "cannot start libmicrohttpd on %s port %u",
                          cfg->host, cfg->port);
    }
    struct epoll_event lev = { .events = EPOLLIN, .data.ptr = &h->lfd };
    struct epoll_event wev = { .events = EPOLLIN, .data.ptr = &h->wake_fd };
    h->efd = epoll_create1(EPOLL_CLOEXEC);
    h->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (h->efd < 0 || h->wake_fd < 0 || epoll_ctl(h->efd, EPOLL_CTL_ADD, h->lfd, &lev) != 0 ||
        epoll_ctl(h->efd, EPOLL_CTL_ADD, h->wake_fd, &wev) != 0 ||
        pthread_create(&h->front, NULL, front_main, h) != 0) {
        *out = NULL;
        srv_http_stop(h);
        return sb_rt_fail(err, SB_ERR_NOMEM, "cannot start the HTTP front thread");
    }
    h->front_on = true;
    atomic_store(&h->started, 1);
    return SB_OK;
}

unsigned srv_http_port(const srv_http *h)
{
    return h->port;
}

void srv_http_quiesce(srv_http *h)
{
    atomic_store(&h->front_quiesce, 1); /* the front closes the listening socket */
    front_wake(h);
}

size_t srv_http_open_requests(srv_http *h)
{
    return atomic_load(&h->open);
}

void srv_http_stop(srv_http *h)
{
    if (!h)
        return;
    if (h->front_on) {
        atomic_store(&h->front_stop, 1);
        front_wake(h);
        pthread_join(h->front, NULL);
    }
    if (h->d)
        MHD_stop_daemon(h->d);
    if (h->lfd >= 0)
        close(h->lfd);
    if (h->efd >= 0)
        close(h->efd);
    if (h->wake_fd >= 0)
        close(h->wake_fd);
    guard_free(h);
}
