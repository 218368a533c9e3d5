/* http.h -- snapbank serve's HTTP layer: libmicrohttpd with an epoll
 * thread pool, requests read whole (up to a body limit) and handed to the
 * application, and the two ways a response can wait for the engine without
 * holding a pool thread.
 *
 *   accept ──► front thread: held until the request line is whole
 *                 │ not HTTP: 400; too late: closed (408); over a limit: closed
 *                 ▼ MHD_add_connection
 *   connection ──► access handler (pool thread) ──► app handler(r)
 *                     │ respond now:  srv_hreq_respond*         ─► sent
 *                     │ wait:         srv_hreq_wait(r, link, poll)
 *                     │                 poll() under *link->mu; not ready:
 *                     │                 the connection is suspended; the
 *                     │                 producer's srv_link_wake resumes it
 *                     │                 and poll runs again
 *                     │ stream (SSE): srv_hreq_stream(r, link, read)
 *                     │                 chunked; read() under *link->mu gives
 *                     │                 bytes, or none yet: the connection
 *                     │                 is suspended until srv_link_wake
 *                     └ closed: on_close(ctx, aborted) once, from a pool
 *                       thread, when the response is done or the client left
 *
 * A suspended connection holds no thread. The producer (the engine thread)
 * changes what poll/read look at and calls srv_link_wake with the same
 * mutex held, so a wake-up is never lost: the check and the suspension
 * happen under that mutex, and so does the resume.
 *
 * The server listens itself: a front thread holds each new connection
 * until its request line is whole, answers a line that is not METHOD
 * TARGET HTTP/D.D with 400 and an error object (libmicrohttpd 0.9.75
 * would close the connection unanswered), enforces the per-address limit
 * and the header deadline, and hands the rest to MHD (MHD_add_connection).
 *
 * Refused before the application sees them: an HTTP/1.1 request without
 * Host (400, RFC 9112), a header that does not come whole in time (408
 * when part of it came, else the connection is just closed).
 *
 * Limits: --max-body-bytes (a Content-Length over it is answered 413 before
 * the body is read; a chunked body that grows over it closes the
 * connection), connection count, connections per address, idle timeout and
 * per-connection memory (MHD options); the guard (http.c) closes a
 * connection whose request header has not come whole within
 * header_timeout_s, and the oldest connection still waiting for its header
 * when more than three quarters of max_conns wait (room for new clients). While the client is suspended MHD does not see it leave;
 * a stream notices at its next write (the engine wakes it on every token),
 * and a waiting request looks at its socket at each wake before poll: a
 * socket that reads as closed ends the request, on_close(ctx, true).
 *
 * Thread safety: srv_hreq calls from the handler, poll and read callbacks
 * (pool threads, one at a time per request); srv_link_wake from any thread
 * with *link->mu held; srv_http_* from the thread that started it.
 */
#ifndef SB_SRV_HTTP_H
#define SB_SRV_HTTP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "core/rt.h"

/* How the server writes JSON: compact, reals to 10 significant digits. */
#define SRV_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(10))

typedef struct srv_http srv_http;
typedef struct srv_hreq srv_hreq;

typedef struct srv_http_cfg {
    const char *host;       /* address to bind: an IPv4 or IPv6 literal, or a name */
    unsigned port;          /* 0: any free port (srv_http_port tells which) */
    unsigned threads;       /* pool threads */
    unsigned max_conns;     /* connections at once */
    unsigned timeout_s;     /* idle timeout once a request's header is in */
    unsigned header_timeout_s; /* a request's whole header must come within
                               this of the accept or the previous answer */
    unsigned max_per_ip;    /* connections from one address (0: no limit) */
    size_t max_body;        /* request body limit, bytes */
} srv_http_cfg;

/* The application's handler of a complete request (body read). */
typedef void (*srv_handler_fn)(void *app, srv_hreq *r);
/* Told each response's status (for metrics): route as set by the handler. */
typedef void (*srv_status_fn)(void *app, const char *route, unsigned status);

/* srv_http_start -- listen on cfg's address and serve with h. On success
 * *out is owned by the caller (srv_http_stop). Returns: SB_OK;
 * SB_ERR_INVAL (host not an address); SB_ERR_IO (cannot listen: err says
 * why, e.g. the port is taken). */
int srv_http_start(const srv_http_cfg *cfg, srv_handler_fn h, srv_status_fn st, void *app,
                   srv_http **out, sb_rt_err *err);

/* srv_http_port -- the port listened on. */
unsigned srv_http_port(const srv_http *h);

/* srv_http_quiesce -- stop accepting connections (existing ones go on). */
void srv_http_quiesce(srv_http *h);

/* srv_http_open_requests -- requests begun and not yet closed. */
size_t srv_http_open_requests(srv_http *h);

/* Connections closed before their request since the start. */
typedef struct srv_http_counts {
    uint64_t header_timeout;   /* the header did not come whole in time */
    uint64_t room;             /* the oldest waiting one, for a new client */
    uint64_t per_ip;           /* over max_per_ip of its address */
    uint64_t bad_request_line; /* answered 400: not METHOD TARGET HTTP/D.D */
} srv_http_counts;

/* srv_http_guard_counts -- the counts above into *c. */
void srv_http_guard_counts(srv_http *h, srv_http_counts *c);

/* srv_http_stop -- close every connection and free. Every suspended
 * connection must have been woken first. NULL is a no-op. */
void srv_http_stop(srv_http *h);

/* ---- one request ------------------------------------------------------------------- */

const char *srv_hreq_method(const srv_hreq *r);
const char *srv_hreq_path(const srv_hreq *r);  /* without the query string */
/* srv_hreq_header -- a request header's value (NULL when absent); borrowed
 * for the request's life. */
const char *srv_hreq_header(const srv_hreq *r, const char *name);
/* srv_hreq_body -- the body (NUL-terminated; *len its length). */
const char *srv_hreq_body(const srv_hreq *r, size_t *len);
/* srv_hreq_set_route -- the metrics label of this request (a static string). */
void srv_hreq_set_route(srv_hreq *r, const char *route);

/* srv_hreq_respond -- answer with status and body (len bytes, copied), of
 * content type ctype; headers: NULL or name, value, ..., NULL. */
void srv_hreq_respond(srv_hreq *r, unsigned status, const char *ctype, const char *body,
                      size_t len, const char *const *headers);

/* srv_hreq_json -- answer with j (reference stolen) as JSON. */
void srv_hreq_json(srv_hreq *r, unsigned status, json_t *j, const char *const *headers);

/* srv_hreq_error -- answer with an OpenAI error object
 * {"error": {"message", "type", "param", "code"}}; param and code may be
 * NULL (null in the JSON). */
void srv_hreq_error(srv_hreq *r, unsigned status, const char *type, const char *code,
                    const char *param, const char *const *headers, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* The link between a waiting request and its producer. */
typedef struct srv_link {
    pthread_mutex_t *mu;     /* the producer's lock (borrowed) */
    void *conn;              /* set by the HTTP layer */
    bool parked;             /* suspended until srv_link_wake (under *mu) */
} srv_link;

/* srv_link_wake -- with *l->mu held: resume the connection if it waits. */
void srv_link_wake(srv_link *l);

/* Called under *link->mu: answer (a srv_hreq_respond* call) and return
 * true, or return false to wait for the next wake. */
typedef bool (*srv_poll_fn)(void *ctx, srv_hreq *r);

/* srv_hreq_wait -- answer later: poll now and after each wake. */
void srv_hreq_wait(srv_hreq *r, srv_link *link, srv_poll_fn poll, void *ctx);

#define SRV_READ_END ((ssize_t)-1)   /* the stream is over */
#define SRV_READ_ERROR ((ssize_t)-2) /* close the connection */
/* Called under *link->mu: up to max bytes of the stream into buf; 0: none
 * yet (the connection waits for a wake). */
typedef ssize_t (*srv_read_fn)(void *ctx, char *buf, size_t max);

/* srv_hreq_stream -- answer 200 with a text/event-stream body read from
 * read; release(ctx) once the body is done with (may be NULL). */
void srv_hreq_stream(srv_hreq *r, srv_link *link, srv_read_fn read, void (*release)(void *ctx),
                     void *ctx);

#define SRV_HREQ_EXTRA 8 /* headers srv_hreq_add_header keeps */

/* srv_hreq_add_header -- a header for the request's answer, whichever call
 * makes it (name and value copied; past SRV_HREQ_EXTRA, or out of memory,
 * it is dropped). */
void srv_hreq_add_header(srv_hreq *r, const char *name, const char *value);

/* srv_hreq_on_close -- fn(ctx, aborted) once when the request is over:
 * aborted when the client left or the response could not be sent. */
void srv_hreq_on_close(srv_hreq *r, void (*fn)(void *ctx, bool aborted), void *ctx);

#endif /* SB_SRV_HTTP_H */
