/* Store registry, URL dispatch and the common store helpers. */
#include <inbox/sys/store.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/secret.h"
#include "core/internal.h"

#define MAX_STORES 8

static const inbox_store_vtable *registry[MAX_STORES];
static int nregistered;
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;

static void register_builtins_once(void)
{
	for (const inbox_store_vtable *const *p = inbox__builtin_stores; *p;
	     p++)
		inbox_store_register(*p);
}

/* Stores are opened from several threads at once (one per consumer). */
static void register_builtins(void)
{
	pthread_once(&builtins_once, register_builtins_once);
}

/* Does vt open scheme s (its first n bytes; SIZE_MAX: all of it)? */
static int has_scheme(const inbox_store_vtable *vt, const char *s, size_t n)
{
	if (n == SIZE_MAX)
		n = strlen(s);
	const char *names[2] = {vt->scheme,
	                        vt->version >= 6 ? vt->alias : NULL};
	for (int i = 0; i < 2; i++)
		if (names[i] && strlen(names[i]) == n &&
		    strncmp(names[i], s, n) == 0)
			return 1;
	return 0;
}

int inbox_store_register(const inbox_store_vtable *vt)
{
	if (!vt || !vt->scheme || !vt->kind || !vt->open || !vt->close ||
	    !vt->migrate || !vt->schema_version || !vt->begin || !vt->commit ||
	    !vt->rollback || !vt->savepoint || !vt->release ||
	    !vt->rollback_to || !vt->exec || !vt->query ||
	    !vt->register_consumer || !vt->claim || !vt->reclaim ||
	    !vt->finish || !vt->extend || !vt->dead_letter || !vt->purge ||
	    !vt->native || vt->version < 1 ||
	    vt->version > INBOX_STORE_VTABLE_VERSION)
		return INBOX_ERR_INVALID;
	/* Version 2 added the outbox: a backend claiming it has all of it. */
	if (vt->version >= 2 &&
	    (!vt->outbox_add || !vt->outbox_claim || !vt->outbox_finish ||
	     !vt->outbox_counts || !vt->outbox_purge))
		return INBOX_ERR_INVALID;
	/* Version 6: the dialect and the operator's SQL. The fields beyond a
	 * backend's version are not read at all: its struct may end before
	 * them. */
	if (vt->version >= 6 &&
	    (!vt->sql_expr || !vt->exec_setup || !vt->check_sql))
		return INBOX_ERR_INVALID;
	/* Version 7: stored results; the stored retention window (the core
	 * reads no table). */
	if (vt->version >= 7 && (!vt->set_result || !vt->stored_retention))
		return INBOX_ERR_INVALID;
	for (int i = 0; i < nregistered; i++)
		if (has_scheme(registry[i], vt->scheme, SIZE_MAX) ||
		    (vt->version >= 6 && vt->alias &&
		     has_scheme(registry[i], vt->alias, SIZE_MAX)))
			return INBOX_ERR_INVALID;
	if (nregistered == MAX_STORES)
		return INBOX_ERR_INVALID;
	registry[nregistered++] = vt;
	return INBOX_OK;
}

static const inbox_store_vtable *find_scheme(const char *url)
{
	const char *colon = strchr(url, ':');
	if (!colon)
		return NULL;
	size_t n = (size_t)(colon - url);
	for (int i = 0; i < nregistered; i++)
		if (has_scheme(registry[i], url, n))
			return registry[i];
	return NULL;
}

const char *inbox_store_scheme(size_t i)
{
	register_builtins();
	if (i >= (size_t)nregistered)
		return NULL;
	return registry[i]->scheme;
}

int inbox_store_client_version(size_t i, char *out, size_t len)
{
	register_builtins();
	if (len)
		out[0] = '\0';
	if (i >= (size_t)nregistered)
		return INBOX_ERR_NOTFOUND;
	const inbox_store_vtable *vt = registry[i];
	if (vt->version < 7 || !vt->client_version)
		return 0;
	int n = vt->client_version(out, len);
	return n < 0 ? 0 : n;
}

int inbox_store_known_url(const char *url)
{
	if (!url)
		return 0;
	register_builtins();
	return find_scheme(url) != NULL;
}

int inbox_store_url_private(const char *url)
{
	if (!url)
		return 0;
	register_builtins();
	const inbox_store_vtable *vt = find_scheme(url);
	if (!vt || vt->version < 6 || !vt->url_private)
		return 0;
	return vt->url_private(url) ? 1 : 0;
}

static int valid_ident(const char *s, int allow_empty)
{
	if (!s || !*s)
		return allow_empty;
	if (strlen(s) > 48)
		return 0;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_'))
			return 0;
	return 1;
}

int inbox_store_open(inbox_store **out, const char *url,
                     const inbox_store_options *opts)
{
	inbox_store_options def = INBOX_STORE_OPTIONS_INIT;
	if (!out)
		return INBOX_ERR_INVALID;
	*out = NULL;
	/* Every handle starts with a store: the jansson allocator is in place
	 * before the program's consumer and dispatcher threads use it. */
	inbox__json_alloc_init();
	if (!url)
		return INBOX_ERR_URL;
	if (!opts)
		opts = &def;
	if (inbox__vcheck(INBOX__V_STORE_OPTIONS, opts->version, NULL, 0) < 0)
		return INBOX_ERR_INVALID;
	if (!valid_ident(opts->table_prefix, 1) ||
	    !valid_ident(opts->schema, 1))
		return INBOX_ERR_INVALID;
	register_builtins();
	const inbox_store_vtable *vt = find_scheme(url);
	if (!vt)
		return INBOX_ERR_URL;
	inbox__secrets *sec = NULL;
	if (inbox__secrets_add_url(&sec, url) < 0) {
		inbox__secrets_free(sec);
		return INBOX_ERR_NOMEM;
	}
	int rc = vt->open(out, url, opts);
	if (*out && inbox__secrets_merge(&(*out)->secrets, sec) < 0 &&
	    rc == INBOX_OK)
		rc = INBOX_ERR_NOMEM;
	inbox__secrets_free(sec);
	if (*out) {
		inbox_store *st = *out;
		/* What open wrote before the handle had the URL's secrets. */
		inbox__secrets_scrub(
		    st->secrets, st->errmsg, sizeof(st->errmsg),
		    strlen(st->errmsg) + 1 == sizeof(st->errmsg));
		(*out)->vt = vt;
		if (opts->table_prefix)
			snprintf((*out)->prefix, sizeof((*out)->prefix), "%s",
			         opts->table_prefix);
		/* Only a store with schemas takes the option (a backend
		 * older than version 6 has no flags: it always did). */
		if (opts->schema &&
		    (vt->version < 6 || (vt->flags & INBOX_STORE_F_SCHEMAS)))
			snprintf((*out)->schema, sizeof((*out)->schema), "%s",
			         opts->schema);
	}
	if (rc == INBOX_OK && opts->auto_migrate)
		rc = vt->migrate(*out);
	return rc;
}

void inbox_store_close(inbox_store *st)
{
	if (!st)
		return;
	inbox__secrets *sec = st->secrets;
	st->vt->close(st);
	inbox__secrets_free(sec);
}

int inbox_store_migrate(inbox_store *st)
{
	if (!st)
		return INBOX_ERR_INVALID;
	inbox__store_clearerr(st);
	return st->vt->migrate(st);
}

int inbox_store_schema_version(inbox_store *st, int *version)
{
	if (!st || !version)
		return INBOX_ERR_INVALID;
	return st->vt->schema_version(st, version);
}

const char *inbox_store_errmsg(const inbox_store *st)
{
	return st ? st->errmsg : "no store";
}

const char *inbox_store_errcode(const inbox_store *st)
{
	return st ? st->errcode : "";
}

uint64_t inbox_store_connection_id(const inbox_store *st)
{
	if (!st)
		return 0;
	if (st->vt->version < 4 || !st->vt->connection_id)
		return 1;
	return st->vt->connection_id(st);
}

const char *inbox_store_kind(const inbox_store *st)
{
	return st ? st->vt->kind : "";
}

int inbox_store_seal(inbox_store *st, int64_t min_rows, int *sealed)
{
	int dummy;
	if (!sealed)
		sealed = &dummy;
	*sealed = 0;
	if (!st)
		return INBOX_ERR_INVALID;
	if (st->in_txn)
		return INBOX_ERR_STATE;
	inbox__store_clearerr(st);
	if (st->vt->version < 3 || !st->vt->seal)
		return INBOX_OK;
	return st->vt->seal(st, min_rows, sealed);
}

int inbox_store_purge(inbox_store *st, const char *consumer,
                      int64_t retention_seconds, int batch_limit, int dry_run,
                      int64_t *deleted)
{
	int64_t dummy;
	if (!st || batch_limit < 0)
		return INBOX_ERR_INVALID;
	if (st->in_txn)
		return INBOX_ERR_STATE;
	if (batch_limit == 0)
		batch_limit = 1000;
	inbox__store_clearerr(st);
	int64_t stored = 0;
	int rc = retention_seconds > 0
	             ? inbox__stored_retention(st, consumer, &stored)
	             : INBOX_OK;
	if (rc < 0)
		return rc;
	if (stored > retention_seconds && retention_seconds > 0) {
		/* Never below a stored window (with consumer NULL: below the
		 * longest, which would cut into it for that consumer). */
		inbox_store_seterr(
		    st, "",
		    "purge: a window of %llds is shorter than the "
		    "%llds stored%s%s%s",
		    (long long)retention_seconds, (long long)stored,
		    consumer ? " for consumer \"" : "",
		    consumer ? consumer : "", consumer ? "\"" : "");
		return INBOX_ERR_INVALID;
	}
	return st->vt->purge(st, consumer, retention_seconds, batch_limit,
	                     dry_run, deleted ? deleted : &dummy);
}

void inbox_store_seterr(inbox_store *st, const char *code, const char *fmt, ...)
{
	/* Scrubbed before it is cut to fit: a secret cut in half would
	 * not be found. */
	char msg[4 * sizeof(st->errmsg)];
	va_list ap;
	snprintf(st->errcode, sizeof(st->errcode), "%s", code ? code : "");
	va_start(ap, fmt);
	int len = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	inbox__secrets_scrub(st->secrets, msg, sizeof(msg),
	                     len >= (int)sizeof(msg));
	snprintf(st->errmsg, sizeof(st->errmsg), "%s", msg);
	/* Trim trailing newlines that drivers like to add. */
	size_t n = strlen(st->errmsg);
	while (n && (st->errmsg[n - 1] == '\n' || st->errmsg[n - 1] == ' '))
		st->errmsg[--n] = '\0';
}

int inbox_store_secret(inbox_store *st, const char *p, size_t n)
{
	return inbox__secrets_add(&st->secrets, p, n);
}

void inbox_store_clearerr(inbox_store *st)
{
	st->errmsg[0] = '\0';
	st->errcode[0] = '\0';
}

static int dialect(inbox_store *st, const char *what)
{
	if (st->vt->version >= 6)
		return INBOX_OK;
	inbox__store_seterr(st, "",
	                    "%s: the %s store's backend (vtable version %u) "
	                    "predates it",
	                    what, st->vt->kind, st->vt->version);
	return INBOX_ERR_STATE;
}

int inbox_store_exec_setup(inbox_store *st, const char *sql)
{
	if (!st || !sql)
		return INBOX_ERR_INVALID;
	if (st->in_txn)
		return INBOX_ERR_STATE;
	inbox__store_clearerr(st);
	int rc = dialect(st, "setup SQL");
	return rc < 0 ? rc : st->vt->exec_setup(st, sql);
}

int inbox_store_check_sql(inbox_store *st, const char *sql, int *nparams)
{
	if (nparams)
		*nparams = 0;
	if (!st || !sql)
		return INBOX_ERR_INVALID;
	if (st->in_txn)
		return INBOX_ERR_STATE;
	inbox__store_clearerr(st);
	int rc = dialect(st, "checking SQL");
	return rc < 0 ? rc : st->vt->check_sql(st, sql, nparams);
}

int inbox__store_expr(inbox_store *st, inbox_sql_expr e, const char *arg,
                      char *out, size_t len)
{
	int rc = dialect(st, "the admin API");
	if (rc < 0)
		return rc;
	int n = st->vt->sql_expr(st, e, arg, out, len);
	if (n < 0) {
		inbox__store_seterr(
		    st, "", "the %s store cannot spell SQL expression %d",
		    st->vt->kind, (int)e);
		return INBOX_ERR_STATE;
	}
	return n;
}

static const char *const status_names[] = {"none", "completed", "processing",
                                           "failed", "dead"};

const char *inbox_status_name(inbox_status s)
{
	if ((int)s < 0 ||
	    (size_t)s >= sizeof(status_names) / sizeof(*status_names))
		return "none";
	return status_names[s];
}

inbox_status inbox_status_parse(const char *s)
{
	if (!s)
		return INBOX_ST_NONE;
	for (size_t i = 1; i < sizeof(status_names) / sizeof(*status_names);
	     i++)
		if (strcmp(s, status_names[i]) == 0)
			return (inbox_status)i;
	return INBOX_ST_NONE;
}

int inbox_store_exec(inbox_store *st, const char *sql, int nparams,
                     const char *const *params, int64_t *rows)
{
	int64_t dummy;
	if (!st || !sql || nparams < 0 || (nparams > 0 && !params))
		return INBOX_ERR_INVALID;
	if (st->in_txn)
		return INBOX_ERR_STATE;
	inbox__store_clearerr(st);
	return st->vt->exec(st, sql, nparams, params, rows ? rows : &dummy);
}

int inbox_store_query(inbox_store *st, const char *sql, int nparams,
                      const char *const *params,
                      int (*fn)(int ncols, const char *const *values,
                                void *payload),
                      void *payload)
{
	if (!st || !sql || !fn || nparams < 0 || (nparams > 0 && !params))
		return INBOX_ERR_INVALID;
	if (st->in_txn)
		return INBOX_ERR_STATE;
	inbox__store_clearerr(st);
	return st->vt->query(st, sql, nparams, params, fn, payload);
}
