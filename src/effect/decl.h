/*
 * Declared effects (include/inbox/decl.h), inside the library: the
 * declaration as built (decl_build.c), its checks and SQL steps
 * (decl.c), its outbox steps (decl_outbox.c).
 */
#ifndef INBOX_EFFECT_DECL_H
#define INBOX_EFFECT_DECL_H

#include <stddef.h>

#include <inbox/decl.h>

/* One condition (inbox_decl_when), owned. */
typedef struct inbox__decl_when {
	char *pointer;
	inbox_decl_when_op op;
	char **values; /* EQUALS, IN */
	size_t *lens;
	int nvalues;
	int exists; /* EXISTS */
} inbox__decl_when;

/* The conditions of one scope: all must hold (none: always). */
typedef struct inbox__decl_whens {
	inbox__decl_when *v;
	int n;
} inbox__decl_whens;

typedef enum inbox__decl_kind {
	INBOX__DECL_SQL = 1,
	INBOX__DECL_UPSERT = 2
} inbox__decl_kind;

/* One effect statement: plain SQL with pointer-bound $N parameters, or a
 * versioned upsert (inbox_txn_upsert_versioned). Every string is owned. */
typedef struct inbox__decl_step {
	inbox__decl_kind kind;
	/* INBOX__DECL_SQL */
	char *sql;
	char **params; /* JSON pointers, $1..$n */
	int nparams;
	/* INBOX__DECL_UPSERT */
	char *table;
	char *key_column, *key_value;         /* key_value: a pointer */
	char *version_column, *version_value; /* version_value: a pointer */
	char **set_columns, **set_values;     /* set_values: pointers */
	int nset;
	inbox__decl_whens when;
	/* INBOX__DECL_SQL: the declared result reads its first row, so it
	 * runs as a query (inbox_decl_set_result) */
	int returns;
} inbox__decl_step;

/* One external effect, declared for every applied message. */
typedef struct inbox__decl_outbox {
	char *step;
	char *kind; /* NULL = http */
	char *method;
	char *url;
	char *headers;
	char *key_header;
	char *reconcile_url;
	struct json_t *body; /* template, or NULL */
	int idempotent;
	int max_attempts; /* 0 = the declaration's outbox_max_attempts */
	inbox__decl_whens when;
} inbox__decl_outbox;

struct inbox_decl {
	char *consumer; /* NULL: no outbox steps allowed */
	char *setup;    /* NULL: none */
	int outbox_max_attempts;
	inbox__decl_step *steps;
	int nsteps, capsteps;
	inbox__decl_outbox *outbox;
	int noutbox, capoutbox;
	inbox__decl_whens when; /* the message's: no step runs unless */
	int last; /* the step added last: 1 SQL/upsert, 2 outbox */
	struct json_t
	    *result; /* the result template, or NULL (decl_result.c) */
	/* response headers stored with the result (http:// routes): an
	 * object of name -> "text{leaf}text" templates, or NULL */
	struct json_t *headers;
};

/* The content type of a result that carries response headers: the bytes
 * are {"headers":{NAME:VALUE,...},"body":BODY} (BODY the declared
 * result, or null). Only the http:// source reads it (http_reply.c
 * spells the same text). */
#define INBOX__HTTP_RESULT_TYPE "application/vnd.inbox.http-response+json"

/* Whether every condition holds for m: 1, 0, or INBOX_ERR_NOMEM. */
int inbox__decl_holds(const inbox__decl_whens *w, const inbox_msg *m);
void inbox__decl_whens_free(inbox__decl_whens *w);

/* Static checks of one effect statement, without a database: exactly one
 * statement, no transaction control (the effect runs inside the inbox's
 * transaction), and the $N placeholders are exactly $1..$nparams.
 * 0, or -1 with the reason in why. (The config reader calls it too, to
 * point at the line of the statement.) */
int inbox__decl_sql_check(const char *sql, int nparams,
                          const char *const *params, char *why, size_t len);

/* Run setup SQL (several statements allowed) outside any transaction. 0,
 * or with the database's message in err INBOX_ERR_STORE (the SQL was
 * refused) or INBOX_ERR_TRANSIENT (the database went away meanwhile). */
int inbox__decl_setup_run(inbox_store *st, const char *sql, char *err,
                          size_t len);

/* The fixed fields of an outbox step (everything but the body) into *e,
 * which borrows s's strings. */
void inbox__decl_outbox_effect(inbox_outbox_effect *e,
                               const inbox__decl_outbox *s);

/* Declare every outbox step of `d` whose conditions hold for message m
 * (called by the handler after the SQL steps), counting them in *ran. A body
 * pointer missing from the message is permanent: REJECT with the reason; a
 * store failure: RETRY. */
int inbox__decl_outbox_run(inbox_txn *t, const inbox_msg *m,
                           const inbox_decl *d, int *ran);

/* decl_result.c: the first row a step returned, as a JSON object of its
 * columns' texts (NULL: none returned). */
typedef struct inbox__decl_row {
	struct json_t *row;
	int nomem;    /* the row could not be kept */
	int bad_text; /* a column's text is not UTF-8 */
} inbox__decl_row;
/* An inbox_row_fn filling an inbox__decl_row from the first row. */
int inbox__decl_row_fn(int ncols, const char *const *values, void *payload);
/* Build the declared result from the message and rows[i] (step i + 1's
 * first row, or NULL) and store it (inbox_txn_set_result): OK, or a
 * verdict with the reason set — REJECT for what the message or the
 * declaration got wrong (a missing field, a result over the consumer's
 * max_result_bytes), RETRY otherwise. */
int inbox__decl_result_run(inbox_txn *t, const inbox_msg *m,
                           const inbox_decl *d, struct json_t *const *rows);
/* Add a response header stored with the result: name (an HTTP token,
 * not one the source writes itself) and a template of text and {leaf}
 * parts, each leaf a result leaf ({/pointer}, {#N.column}, {key}).
 * INBOX_OK, INBOX_ERR_INVALID (why set), INBOX_ERR_NOMEM. */
int inbox__decl_add_header(inbox_decl *d, const char *name, const char *tmpl,
                           char *why, size_t len);

#endif
