/* Internal structure of consumers, messages and transactions. */
#ifndef INBOX_CORE_CONSUMER_H
#define INBOX_CORE_CONSUMER_H

#include <jansson.h>

#include "base/buf.h"
#include "base/json.h"
#include "core/internal.h"

/* A string allocated for inbox_msg_get(), freed with the message. */
typedef struct inbox__str {
	struct inbox__str *next;
	char text[];
} inbox__str;

struct inbox_msg {
	const inbox_delivery *d;
	json_t *root;     /* parsed payload, NULL if it did not parse */
	char *id;         /* message id: idbuf.data or NULL */
	inbox__buf idbuf; /* storage of id, reused between messages */
	inbox__buf key;   /* rendered key (empty if none) */
	char fp[65];      /* fingerprint, "" if none */
	int32_t attempt;  /* this attempt's number, 1 on the first */
	inbox__str *strs; /* inbox_msg_get() results */
	int nomem;        /* inbox_msg_get() ran out of memory */
	/* d->position as the stores keep it (inbox__position_text): d's own
	 * text, or posbuf's (reused between messages); NULL when none. */
	const char *position;
	inbox__buf posbuf;
};

/* A stored result: one a handler set (inbox_txn_set_result), kept in
 * buffers reused between messages. */
typedef struct inbox__stored {
	int set;         /* a result was set */
	int has_type;    /* type holds a content type */
	inbox__buf data; /* the bytes (NUL-terminated by the buffer) */
	inbox__buf type;
} inbox__stored;

struct inbox_txn {
	inbox_consumer *c;
	inbox_store *st;
	inbox_msg *msg;
	int failed; /* a statement failed: OK becomes RETRY */
	/* A statement failed for the infrastructure's sake (TRANSIENT, or
	 * the store's REDO): the error, which the whole batch then returns
	 * whatever the handler says — never the message's fault. */
	int infra_err;
	int nomem; /* ...for want of memory: the batch fails (NOMEM) */
	int stale;
	int skipped; /* inbox_txn_mark_skipped: no step wanted it */
	/* Where inbox_txn_set_result() writes (NULL: not in a handler that
	 * may store one); the consumer's max_result_bytes. */
	inbox__stored *result;
	size_t max_result;
	char reason[512];
};

/* Per-delivery state of a batch. */
typedef enum slot_kind {
	SLOT_BAD = 0, /* cannot be claimed: dead letter without a record */
	SLOT_PRIMARY, /* first delivery of its key in the batch */
	SLOT_REPEAT   /* same key as an earlier delivery of the batch */
} slot_kind;

typedef struct inbox__slot {
	inbox_msg msg;
	slot_kind kind;
	int too_old;
	size_t first; /* SLOT_REPEAT: index of the primary */
	size_t claim; /* SLOT_PRIMARY: index into claims */
	char reason[512];
	inbox_result res;
	int takeover; /* took over an expired lease */
	int64_t dl_id;
	inbox__stored own; /* the result this processing's handler set */
	/* decide(): 1 when the handler is to run (apply() with run_attempt
	 * and run_stored), 0 when the slot's outcome is already set */
	int run;
	int32_t run_attempt;
	int run_stored;
} inbox__slot;

struct inbox_consumer {
	inbox_store *st;
	char *name;
	inbox__keytmpl *tmpl;
	char *id_pointer;
	char *fp_pointer;
	int64_t retention_s;
	int max_attempts;
	int32_t max_deliveries; /* 0 = no bound */
	int64_t lease_ms;
	size_t max_payload;
	size_t max_result; /* max_result_bytes */
	inbox_replay_policy replay;
	inbox_handler_fn handler;
	void *handler_payload;
	inbox_handlers_fn on_handlers; /* NULL: none (options v6) */
	const inbox_msg **run_msgs;    /* on_handlers' list, slots_cap long */
	inbox_schema *schema;          /* JSON Schema of the payload, or NULL */
	char errmsg[512];

	/* batch scratch, reused between calls */
	inbox__slot *slots;
	size_t slots_cap;
	inbox_claim *claims;
	struct order_entry *order; /* claimable deliveries sorted by key */
	size_t claims_cap;
	size_t claims_held; /* claims[0..held) may hold stored results */
	inbox__buf canon;   /* inbox__msg_prepare's fingerprint input */

	/* What inbox_lease_acquire_result()'s inbox_result points at, kept
	 * until the next acquisition or the close: the key, the reason, and
	 * the claim whose stored result a duplicate carries. */
	inbox__buf lease_key;
	char lease_reason[512];
	inbox_claim lease_claim;

	inbox_stats stats;
};

/* msg.c */
void inbox__msg_reset(inbox_msg *m); /* keeps the buffers for reuse */
void inbox__msg_free(inbox_msg *m);  /* reset and free the buffers */
/* Parse and derive id, key and fingerprint. 0 when claimable; 1 with a
 * reason for a dead letter; INBOX_ERR_NOMEM (never the message's fault:
 * the batch fails). */
int inbox__msg_prepare(inbox_consumer *c, inbox_msg *m, const inbox_delivery *d,
                       char *reason, size_t rlen);

/* txn.c */
void inbox__txn_init(inbox_txn *t, inbox_consumer *c, inbox_msg *m);
/* Record the outcome rc of a statement the handler ran through t. */
void inbox__txn_failed(inbox_txn *t, int rc);

/* consumer.c, shared with lease.c */
/* Run fn under a savepoint. `result` (may be NULL: the handler cannot
 * store one) receives what the handler set with inbox_txn_set_result:
 * kept for OK and REJECT, dropped (set = 0) for RETRY. */
int inbox__run_handler(inbox_consumer *c, inbox_msg *m, inbox_handler_fn fn,
                       void *payload, int *verdict, inbox_outcome *ok,
                       char *reason, size_t rlen, inbox__stored *result);
/* Claim through the store whatever its vtable version (the version 7
 * fields zeroed first, left zero by an older backend). */
int inbox__claim(inbox_consumer *c, inbox_claim *claims, size_t n,
                 inbox_status status, int64_t lease_ms);
/* Free what a claim read back (the version 7 fields) and zero them. */
void inbox__claim_release(inbox_claim *cl);
/* Record on key's record the outcome it completed with and the result r
 * (r NULL or unset: none). Nothing is written for APPLIED without a
 * result (the hot path) or on a backend without results. */
int inbox__store_result(inbox_consumer *c, const char *key,
                        inbox_outcome outcome, const inbox__stored *r);
int inbox__write_dead_letter(inbox_consumer *c, const inbox_msg *m,
                             const char *reason, int32_t attempts,
                             const char *stored_fp, int64_t *id);
void inbox__set_err(inbox_consumer *c, int rc, const char *what);
void inbox__observe(inbox_consumer *c, inbox_outcome o, double seconds,
                    int takeover);

#endif
