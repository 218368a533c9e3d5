/* tenants.h -- who may call snapbank serve, and in which bank scope: the
 * API keys of --api-key-file, each mapped to a tenant, and the admin key of
 * --admin-key-file.
 *
 * A tenant is a bank scope: its own namespace (sb_ns_open with the tenant's
 * name as the scope), so one tenant's prompts never restore another's pages
 * and no timing tells one tenant what another asked. Sessions are kept per
 * tenant too. Without --api-key-file there is one tenant, "default", whose
 * scope is empty (the scope `snapbank run` and `snapbank chat` use by
 * default), and no key is asked for.
 *
 * --api-key-file, one entry per line (version 1 of the format):
 *
 *   # comment lines and blank lines are skipped
 *   KEY TENANT
 *   KEY TENANT
 *
 *   KEY     8-512 characters from A-Z a-z 0-9 . _ ~ + / = -  (what a client
 *           sends as "Authorization: Bearer KEY")
 *   TENANT  1-64 characters from A-Z a-z 0-9 . _ -, not starting with '.';
 *           several keys may name one tenant (key rotation)
 *
 * separated by spaces or tabs; a key listed twice, or any other line, is an
 * error naming the file and line. --admin-key-file holds one KEY (the same
 * characters) on its first non-comment line. Keys are compared in time that
 * does not depend on where they differ. The files should be readable by
 * the server's user alone: a file that others may read is named in a
 * warning.
 *
 * Thread safety: immutable once loaded, except each tenant's ns handle,
 * which the server replaces only while no request runs (bank clear).
 */
#ifndef SB_SRV_TENANTS_H
#define SB_SRV_TENANTS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/rt.h"
#include "snapbank.h"

#define SRV_TENANT_MAX 64u
#define SRV_KEY_MAX 512u

typedef struct srv_tenant {
    char name[SRV_TENANT_MAX + 1]; /* "default" without a key file */
    const char *scope;             /* the bank scope: name, or "" for default */
    size_t index;                  /* 0 .. count - 1 */
    sb_ns *ns;                     /* the tenant's namespace, owned by the server */
} srv_tenant;

typedef struct srv_tenants srv_tenants;

/* srv_tenants_load -- the tenants of the key file at path, or the one open
 * tenant when path is NULL. On success *out is owned by the caller
 * (srv_tenants_free). Returns: SB_OK; SB_ERR_IO (cannot read the file);
 * SB_ERR_FORMAT (a bad line, a duplicate key, no key at all: err names the
 * file and line); SB_ERR_NOMEM. */
int srv_tenants_load(const char *path, srv_tenants **out, sb_rt_err *err);

/* srv_tenants_from_keys -- llama-server's --api-key: keys (comma-separated,
 * each as in the file above) all of the one tenant "default", whose scope
 * is empty as without keys. Returns: SB_OK; SB_ERR_FORMAT (a bad key, or
 * none: err says so); SB_ERR_NOMEM. */
int srv_tenants_from_keys(const char *keys, srv_tenants **out, sb_rt_err *err);

/* srv_tenants_free -- NULL is a no-op (the ns handles are the caller's). */
void srv_tenants_free(srv_tenants *t);

/* srv_tenants_keyed -- whether keys are asked for (a key file was given). */
bool srv_tenants_keyed(const srv_tenants *t);

/* srv_tenants_count, srv_tenants_at -- the tenants, index 0 .. count-1. */
size_t srv_tenants_count(const srv_tenants *t);
srv_tenant *srv_tenants_at(srv_tenants *t, size_t i);

/* srv_tenants_auth -- the tenant of an Authorization header value ("Bearer
 * KEY"; NULL when absent). Without a key file every request is the default
 * tenant's. Returns: the tenant; NULL for no key or a wrong one. */
srv_tenant *srv_tenants_auth(srv_tenants *t, const char *authorization);

/* srv_admin_key_load -- the admin key from path into key (SRV_KEY_MAX + 1
 * bytes). Returns: SB_OK; SB_ERR_IO; SB_ERR_FORMAT (err names the file). */
int srv_admin_key_load(const char *path, char *key, sb_rt_err *err);

/* srv_bearer_is -- whether an Authorization header value is "Bearer KEY"
 * for this key (constant time in where they differ). */
bool srv_bearer_is(const char *authorization, const char *key);

#endif /* SB_SRV_TENANTS_H */
