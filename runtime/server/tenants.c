/* tenants.c -- API keys to tenants, and the admin key (tenants.h). */
#define _POSIX_C_SOURCE 200809L
#include "server/tenants.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

typedef struct key_entry {
    char key[SRV_KEY_MAX + 1];
    size_t tenant;
} key_entry;

struct srv_tenants {
    bool keyed;
    srv_tenant *t;
    size_t n_t;
    key_entry *keys;
    size_t n_keys;
};

static bool key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("._~+/=-", c) != NULL;
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

/* Equal strings, in time that depends on their lengths only. */
static bool ct_equal(const char *a, size_t na, const char *b, size_t nb)
{
    size_t n = na > nb ? na : nb;
    unsigned char d = na != nb;
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)((i < na ? a[i] : 0) ^ (i < nb ? b[i] : 0));
    return d == 0;
}

/* The key of "Bearer KEY" (case-insensitive scheme, spaces after it);
 * NULL when the value is not one. */
static const char *bearer(const char *h)
{
    if (!h || strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t'))
        return NULL;
    h += 6;
    while (*h == ' ' || *h == '\t')
        h++;
    return h;
}

bool srv_bearer_is(const char *authorization, const char *key)
{
    const char *k = bearer(authorization);
    return k && key && *key && ct_equal(k, strlen(k), key, strlen(key));
}

static void warn_mode(FILE *f, const char *path)
{
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & 0044))
        fprintf(stderr, "snapbank serve: warning: %s can be read by other users "
                        "(chmod 600 it)\n", path);
}

/* Split line into words (at most 3) in place. Returns the count. */
static int words(char *line, char **w)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (n == 3)
            return 4;
        w[n++] = t;
    }
    return n;
}

/* The words of the next line of f that is neither blank nor a comment
 * (*no counts lines read). Returns: their count (4: more than 3); -1 at the
 * end of the file. */
static int next_line(FILE *f, char **line, size_t *cap, unsigned *no, char **w)
{
    while (getline(line, cap, f) >= 0) {
        (*no)++;
        if ((*line)[strspn(*line, " \t")] == '#')
            continue;
        int nw = words(*line, w);
        if (nw)
            return nw;
    }
    return -1;
}

static bool valid_key(const char *k)
{
    size_t n = strlen(k);
    if (n < 8 || n > SRV_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!key_char(k[i]))
            return false;
    return true;
}

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > SRV_TENANT_MAX || s[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!name_char(s[i]))
            return false;
    return true;
}

static int add_tenant(srv_tenants *t, const char *name, size_t *index)
{
    for (size_t i = 0; i < t->n_t; i++)
        if (!strcmp(t->t[i].name, name)) {
            *index = i;
            return SB_OK;
        }
    srv_tenant *nt = realloc(t->t, (t->n_t + 1) * sizeof *nt);
    if (!nt)
        return SB_ERR_NOMEM;
    t->t = nt;
    memset(&nt[t->n_t], 0, sizeof *nt);
    snprintf(nt[t->n_t].name, sizeof nt[t->n_t].name, "%s", name);
    nt[t->n_t].index = t->n_t;
    *index = t->n_t++;
    return SB_OK;
}

int srv_tenants_load(const char *path, srv_tenants **out, sb_rt_err *err)
{
    *out = NULL;
    srv_tenants *t = calloc(1, sizeof *t);
    if (!t)
        return sb_rt_fail(err, SB_ERR_NOMEM, "out of memory");
    int rc = SB_OK;
    size_t idx;
    if (!path) {
        if ((rc = add_tenant(t, "default", &idx)) != SB_OK) {
            srv_tenants_free(t);
            return sb_rt_fail(err, rc, "out of memory");
        }
        t->t[0].scope = "";
        *out = t;
        return SB_OK;
    }
    t->keyed = true;
    FILE *f = fopen(path, "r");
    if (!f) {
        srv_tenants_free(t);
        return sb_rt_fail(err, SB_ERR_IO, "--api-key-file %s: cannot open: %s", path,
                          strerror(errno));
    }
    warn_mode(f, path);
    char *line = NULL;
    size_t cap = 0;
    unsigned no = 0;
    char *w[3];
    for (int nw; rc == SB_OK && (nw = next_line(f, &line, &cap, &no, w)) >= 0;) {
        if (nw != 2 || !valid_key(w[0]) || !valid_name(w[1])) {
            rc = sb_rt_fail(err, SB_ERR_FORMAT, "--api-key-file %s:%u: expected 'KEY TENANT' "
                            "(KEY 8-512 of A-Za-z0-9._~+/=-, TENANT 1-64 of A-Za-z0-9._-)",
                            path, no);
            break;
        }
        for (size_t i = 0; i < t->n_keys; i++)
            if (!strcmp(t->keys[i].key, w[0]))
                rc = sb_rt_fail(err, SB_ERR_FORMAT, "--api-key-file %s:%u: a key listed twice",
                                path, no);
        if (rc != SB_OK)
            break;
        key_entry *nk = realloc(t->keys, (t->n_keys + 1) * sizeof *nk);
        if (!nk || (rc = add_tenant(t, w[1], &idx)) != SB_OK) {
            if (nk)
                t->keys = nk;
            rc = sb_rt_fail(err, SB_ERR_NOMEM, "out of memory");
            break;
        }
        t->keys = nk;
        snprintf(nk[t->n_keys].key, sizeof nk[t->n_keys].key, "%s", w[0]);
        nk[t->n_keys++].tenant = idx;
    }
    if (rc == SB_OK && ferror(f))
        rc = sb_rt_fail(err, SB_ERR_IO, "--api-key-file %s: read error", path);
    if (rc == SB_OK && t->n_keys == 0)
        rc = sb_rt_fail(err, SB_ERR_FORMAT, "--api-key-file %s: no key in it", path);
    free(line);
    fclose(f);
    if (rc != SB_OK) {
        srv_tenants_free(t);
        return rc;
    }
    for (size_t i = 0; i < t->n_t; i++)
        t->t[i].scope = t->t[i].name;
    *out = t;
    return SB_OK;
}

int srv_tenants_from_keys(const char *keys, srv_tenants **out, sb_rt_err *err)
{
    *out = NULL;
    srv_tenants *t = calloc(1, sizeof *t);
    char *copy = keys ? strdup(keys) : NULL;
    size_t idx;
    int rc = t && copy && add_tenant(t, "default", &idx) == SB_OK
                 ? SB_OK : sb_rt_fail(err, SB_ERR_NOMEM, "out of memory");
    if (t)
        t->keyed = true;
    char *save = NULL;
    for (char *k = rc == SB_OK ? strtok_r(copy, ",", &save) : NULL; k && rc == SB_OK;
         k = strtok_r(NULL, ",", &save)) {
        if (!valid_key(k)) {
            rc = sb_rt_fail(err, SB_ERR_FORMAT, "--api-key: each key 8-512 characters of "
                            "A-Za-z0-9._~+/=- (several separated by commas)");
            break;
        }
        key_entry *nk = realloc(t->keys, (t->n_keys + 1) * sizeof *nk);
        if (!nk) {
            rc = sb_rt_fail(err, SB_ERR_NOMEM, "out of memory");
            break;
        }
        t->keys = nk;
        snprintf(nk[t->n_keys].key, sizeof nk[t->n_keys].key, "%s", k);
        nk[t->n_keys++].tenant = 0;
    }
    if (rc == SB_OK && t->n_keys == 0)
        rc = sb_rt_fail(err, SB_ERR_FORMAT, "--api-key: no key given");
    if (copy) { /* no key stays in freed memory */
        memset(copy, 0, strlen(keys));
        free(copy);
    }
    if (rc != SB_OK) {
        srv_tenants_free(t);
        return rc;
    }
    t->t[0].scope = "";
    *out = t;
    return SB_OK;
}

void srv_tenants_free(srv_tenants *t)
{
    if (!t)
        return;
    if (t->keys) /* no key stays in freed memory */
        memset(t->keys, 0, t->n_keys * sizeof *t->keys);
    free(t->keys);
    free(t->t);
    free(t);
}

bool srv_tenants_keyed(const srv_tenants *t)
{
    return t->keyed;
}

size_t srv_tenants_count(const srv_tenants *t)
{
    return t->n_t;
}

srv_tenant *srv_tenants_at(srv_tenants *t, size_t i)
{
    return i < t->n_t ? &t->t[i] : NULL;
}

srv_tenant *srv_tenants_auth(srv_tenants *t, const char *authorization)
{
    if (!t->keyed)
        return &t->t[0];
    const char *k = bearer(authorization);
    if (!k)
        return NULL;
    size_t nk = strlen(k), found = SIZE_MAX;
    for (size_t i = 0; i < t->n_keys; i++) /* every key, whatever matched */
        if (ct_equal(k, nk, t->keys[i].key, strlen(t->keys[i].key)))
            found = t->keys[i].tenant;
    return found == SIZE_MAX ? NULL : &t->t[found];
}

int srv_admin_key_load(const char *path, char *key, sb_rt_err *err)
{
    key[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return sb_rt_fail(err, SB_ERR_IO, "--admin-key-file %s: cannot open: %s", path,
                          strerror(errno));
    warn_mode(f, path);
    char *line = NULL;
    size_t cap = 0;
    int rc = SB_ERR_FORMAT;
    unsigned no = 0;
    char *w[3];
    if (next_line(f, &line, &cap, &no, w) == 1 && valid_key(w[0])) {
        snprintf(key, SRV_KEY_MAX + 1, "%s", w[0]);
        rc = SB_OK;
    }
    if (line)
        memset(line, 0, cap);
    free(line);
    fclose(f);
    if (rc != SB_OK)
        return sb_rt_fail(err, rc, "--admin-key-file %s: expected one KEY (8-512 of "
                          "A-Za-z0-9._~+/=-) on its first line", path);
    return SB_OK;
}
