/*
 * Long handlers: the record is committed as `processing` under a lease with
 * a fencing token, the work runs outside any transaction, and completion
 * commits only while the token is still the current one. An expired lease
 * is taken over by the next delivery (fence + 1), so the first holder's
 * late completion is refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/consumer.h"

struct inbox_lease {
	inbox_consumer *c;
	inbox_delivery d; /* a private copy; strings below */
	char *payload, *id, *headers, *position;
	inbox_msg msg;
	int64_t fence;
	int32_t attempt;
	int done;
};

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static inbox_lease *lease_new(inbox_consumer *c, const inbox_delivery *d)
{
	inbox_lease *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->c = c;
	l->d = *d;
	l->payload = malloc(d->payload_len + 1);
	if (!l->payload) {
		free(l);
		return NULL;
	}
	if (d->payload_len)
		memcpy(l->payload, d->payload, d->payload_len);
	l->payload[d->payload_len] = '\0';
	l->id = dup_or_null(d->id);
	l->headers = dup_or_null(d->headers);
	l->position = dup_or_null(d->position);
	if ((d->id && !l->id) || (d->headers && !l->headers) ||
	    (d->position && !l->position)) {
		/* a missing copy would lose the field in a dead letter */
		inbox_lease_free(l);
		return NULL;
	}
	l->d.payload = l->payload;
	l->d.id = l->id;
	l->d.headers = l->headers;
	l->d.position = l->position;
	return l;
}

void inbox_lease_free(inbox_lease *l)
{
	if (!l)
		return;
	inbox__msg_free(&l->msg);
	free(l->payload);
	free(l->id);
	free(l->headers);
	free(l->position);
	free(l);
}

int64_t inbox_lease_fence(const inbox_lease *l)
{
	return l ? l->fence : 0;
}

const char *inbox_lease_key(const inbox_lease *l)
{
	return l ? l->msg.key.data : NULL;
}

const inbox_msg *inbox_lease_msg(const inbox_lease *l)
{
	return l ? &l->msg : NULL;
}

/* Decide the claim of a lease; runs inside the open transaction. `cl` is
 * the consumer's lease_claim: what the claim read back stays in it for
 * the caller's inbox_result (a duplicate's stored result). */
static int acquire_in_txn(inbox_consumer *c, inbox_lease *l, inbox_claim *cl,
                          inbox_result *res, int *takeover, char *reason,
                          size_t rlen)
{
	inbox_store *st = c->st;
	inbox_msg *m = &l->msg;
	inbox__claim_release(cl);
	memset(cl, 0, sizeof(*cl));
	cl->key = m->key.data;
	cl->fingerprint = m->fp;
	cl->message_id = m->id;
	cl->position = m->position;
	int64_t rows;
	/* one statement takes a new key and reads an existing record with
	 * its stored result: a fresh key costs no second one */
	int rc = inbox__claim(c, cl, 1, INBOX_ST_PROCESSING, c->lease_ms);
	if (rc < 0)
		return rc;
	res->attempts = cl->attempts;
	if (cl->is_new) {
		l->fence = 1;
		l->attempt = 1;
		res->attempts = 1;
		res->outcome = INBOX_ACQUIRED;
		return INBOX_OK;
	}
	if (cl->status != INBOX_ST_NONE &&
	    strcmp(cl->stored_fingerprint, m->fp) != 0) {
		snprintf(reason, rlen,
		         "fingerprint conflict: key \"%s\" was recorded with "
		         "fingerprint %s, this message has %s",
		         m->key.data, cl->stored_fingerprint, m->fp);
		res->outcome = INBOX_CONFLICT;
		return inbox__write_dead_letter(c, m, reason, cl->attempts,
		                                cl->stored_fingerprint,
		                                &res->dead_letter_id);
	}
	switch (cl->status) {
	case INBOX_ST_COMPLETED:
	case INBOX_ST_DEAD:
		res->outcome = INBOX_DUPLICATE;
		/* the first processing's answer, read with the claim */
		res->result = cl->result;
		res->result_len = cl->result ? cl->result_len : 0;
		res->result_type = cl->result ? cl->result_type : NULL;
		res->first_outcome =
		    cl->first_outcome != INBOX_OUTCOME_NONE ? cl->first_outcome
		    : cl->status == INBOX_ST_DEAD ? INBOX_DEAD_LETTERED
		                                  : INBOX_APPLIED;
		return INBOX_OK;
	case INBOX_ST_PROCESSING:
		if (!cl->lease_expired) {
			res->outcome = INBOX_IN_PROGRESS;
			return INBOX_OK;
		}
		*takeover = 1;
		__attribute__((fallthrough));
	case INBOX_ST_FAILED: {
		if (cl->attempts >= c->max_attempts) {
			snprintf(reason, rlen, "max attempts (%d) reached",
			         c->max_attempts);
			rc = st->vt->finish(st, c->name, m->key.data, cl->fence,
			                    cl->status, INBOX_ST_DEAD,
			                    cl->attempts, &rows);
			if (rc < 0)
				return rc;
			*takeover = 0;
			if (rows == 0) {
				reason[0] = '\0';
				res->outcome = INBOX_IN_PROGRESS;
				return INBOX_OK;
			}
			res->outcome = INBOX_DEAD_LETTERED;
			return inbox__write_dead_letter(c, m, reason,
			                                cl->attempts, NULL,
			                                &res->dead_letter_id);
		}
		int taken = 0;
		rc = st->vt->reclaim(st, c->name, m->key.data,
		                     INBOX_ST_PROCESSING, c->lease_ms, &taken,
		                     &l->attempt, &l->fence);
		if (rc < 0)
			return rc;
		if (!taken) {
			*takeover = 0;
			res->outcome = INBOX_IN_PROGRESS;
			return INBOX_OK;
		}
		res->attempts = l->attempt;
		res->outcome = INBOX_ACQUIRED;
		return INBOX_OK;
	}
	default:
		res->outcome = INBOX_IN_PROGRESS;
		return INBOX_OK;
	}
}

int inbox_lease_acquire_result(inbox_consumer *c, const inbox_delivery *d,
                               inbox_lease **lease, inbox_result *res)
{
	if (!c || !d || !lease || !res)
		return INBOX_ERR_INVALID;
	*lease = NULL;
	if (inbox__vcheck(INBOX__V_RESULT, res->version, c->errmsg,
	                  sizeof(c->errmsg)) < 0)
		return INBOX_ERR_INVALID;
	inbox_result full = {.version = INBOX_RESULT_VERSION};
	inbox__vfill(INBOX__V_RESULT, res, &full);
	if (c->st->in_txn)
		return INBOX_ERR_STATE;
	if (inbox__vcheck(INBOX__V_DELIVERY, d->version, c->errmsg,
	                  sizeof(c->errmsg)) < 0)
		return INBOX_ERR_INVALID;
	/* the last acquisition's answer is no longer promised to anyone */
	inbox__claim_release(&c->lease_claim);
	inbox_lease *l = lease_new(c, d);
	if (!l)
		return INBOX_ERR_NOMEM;
	inbox_store *st = c->st;
	char *reason = c->lease_reason;
	reason[0] = '\0';
	int bad = inbox__msg_prepare(c, &l->msg, &l->d, reason,
	                             sizeof(c->lease_reason));
	if (bad < 0) { /* out of memory: not the message's fault */
		inbox__set_err(c, bad, "lease not acquired");
		inbox_lease_free(l);
		return bad;
	}
	double t0 = inbox__mono_seconds();
	int rc, takeover = 0;
	for (int tries = 0; tries < 3; tries++) {
		takeover = 0;
		memset(&full, 0, sizeof(full));
		if (!bad)
			reason[0] = '\0';
		rc = st->vt->begin(st);
		if (rc < 0)
			break;
		if (bad) {
			rc = inbox__write_dead_letter(
			    c, &l->msg, reason, 1, NULL, &full.dead_letter_id);
			full.attempts = 1;
			full.outcome = INBOX_DEAD_LETTERED;
		} else {
			rc = acquire_in_txn(c, l, &c->lease_claim, &full,
			                    &takeover, reason,
			                    sizeof(c->lease_reason));
		}
		if (rc >= 0)
			rc = st->vt->commit(st);
		if (rc < 0 && st->in_txn)
			st->vt->rollback(st);
		if (rc != INBOX_ERR_TRANSIENT)
			break;
	}
	if (rc < 0) {
		inbox__claim_release(&c->lease_claim);
		inbox__set_err(c, rc, "lease acquisition rolled back");
		inbox_lease_free(l);
		return rc;
	}
	inbox_outcome o = full.outcome;
	inbox__observe(c, o == INBOX_ACQUIRED ? INBOX_OUTCOME_NONE : o,
	               o == INBOX_ACQUIRED ? -1.0 : inbox__mono_seconds() - t0,
	               takeover);
	/* the key and the reason live in the consumer until the next
	 * acquisition (the lease may be freed first) */
	inbox__buf_reset(&c->lease_key);
	if (l->msg.key.len && inbox__buf_append(&c->lease_key, l->msg.key.data,
	                                        l->msg.key.len) == 0)
		full.key = c->lease_key.data;
	full.reason = reason[0] ? reason : NULL;
	full.version = res->version;
	inbox__vfill(INBOX__V_RESULT, res, &full);
	if (o == INBOX_ACQUIRED) {
		l->msg.attempt = l->attempt;
		*lease = l;
	} else {
		inbox_lease_free(l);
	}
	return INBOX_OK;
}

int inbox_lease_acquire(inbox_consumer *c, const inbox_delivery *d,
                        inbox_lease **lease, inbox_outcome *outcome)
{
	if (!outcome)
		return INBOX_ERR_INVALID;
	*outcome = INBOX_OUTCOME_NONE;
	inbox_result r = INBOX_RESULT_INIT;
	int rc = inbox_lease_acquire_result(c, d, lease, &r);
	if (rc >= 0)
		*outcome = r.outcome;
	return rc;
}

int inbox_lease_extend(inbox_lease *l)
{
	if (!l || l->done)
		return INBOX_ERR_STATE;
	inbox_store *st = l->c->st;
	int64_t rows = 0;
	int rc = st->vt->begin(st);
	if (rc >= 0)
		rc = st->vt->extend(st, l->c->name, l->msg.key.data, l->fence,
		                    l->c->lease_ms, &rows);
	if (rc >= 0 && rows == 0)
		rc = INBOX_ERR_FENCED;
	if (rc >= 0)
		return st->vt->commit(st);
	if (st->in_txn)
		st->vt->rollback(st);
	return rc;
}

/* Move the record from PROCESSING (with our fence) to `status`. */
static int fenced_finish(inbox_lease *l, inbox_status expect,
                         inbox_status status, int32_t attempts)
{
	inbox_store *st = l->c->st;
	int64_t rows = 0;
	int rc = st->vt->finish(st, l->c->name, l->msg.key.data, l->fence,
	                        expect, status, attempts, &rows);
	if (rc < 0)
		return rc;
	return rows == 0 ? INBOX_ERR_FENCED : INBOX_OK;
}

int inbox_lease_complete(inbox_lease *l, inbox_handler_fn fn, void *payload,
                         inbox_outcome *outcome)
{
	if (!l || !outcome || l->done)
		return INBOX_ERR_INVALID;
	inbox_consumer *c = l->c;
	inbox_store *st = c->st;
	char reason[512] = "";
	int verdict = INBOX_HANDLER_OK;
	inbox_outcome ok = INBOX_APPLIED;
	inbox__stored result = {0};
	double t0 = inbox__mono_seconds();
	*outcome = INBOX_OUTCOME_NONE;
	int rc = st->vt->begin(st);
	if (rc < 0)
		goto out;
	/* Taking the row first checks the fence and locks out a taker. */
	rc = fenced_finish(l, INBOX_ST_PROCESSING, INBOX_ST_COMPLETED,
	                   l->attempt);
	if (rc < 0)
		goto out;
	rc = inbox__run_handler(c, &l->msg, fn, payload, &verdict, &ok, reason,
	                        sizeof(reason), &result);
	if (rc == INBOX__ERR_REDO) /* (no claim here: cannot happen) */
		rc = INBOX_ERR_TRANSIENT;
	if (rc < 0)
		goto out;
	if (verdict == INBOX_HANDLER_OK) {
		*outcome = ok;
		rc = inbox__store_result(c, l->msg.key.data, *outcome, &result);
	} else if (verdict == INBOX_HANDLER_RETRY &&
	           l->attempt < c->max_attempts) {
		rc = fenced_finish(l, INBOX_ST_COMPLETED, INBOX_ST_FAILED,
		                   l->attempt);
		*outcome = INBOX_RETRY;
	} else {
		int64_t id;
		rc = fenced_finish(l, INBOX_ST_COMPLETED, INBOX_ST_DEAD,
		                   l->attempt);
		if (rc >= 0)
			rc = inbox__write_dead_letter(c, &l->msg, reason,
			                              l->attempt, NULL, &id);
		/* a REJECT's result stays with the dead record */
		if (rc >= 0 && verdict == INBOX_HANDLER_REJECT)
			rc = inbox__store_result(c, l->msg.key.data,
			                         INBOX_DEAD_LETTERED, &result);
		*outcome = INBOX_DEAD_LETTERED;
	}
	if (rc >= 0)
		rc = st->vt->commit(st);
out:
	inbox__buf_free(&result.data);
	inbox__buf_free(&result.type);
	if (rc < 0 && st->in_txn)
		st->vt->rollback(st);
	if (rc == INBOX_ERR_FENCED) {
		c->stats.fenced++;
		snprintf(c->errmsg, sizeof(c->errmsg),
		         "lease on \"%s\" (fence %lld) was taken over; "
		         "completion refused",
		         l->msg.key.data, (long long)l->fence);
	} else if (rc < 0) {
		inbox__set_err(c, rc, "lease completion rolled back");
	}
	if (rc < 0) {
		*outcome = INBOX_OUTCOME_NONE;
		return rc;
	}
	l->done = 1;
	inbox__observe(c, *outcome, inbox__mono_seconds() - t0, 0);
	return INBOX_OK;
}

int inbox_lease_fail(inbox_lease *l, const char *why)
{
	if (!l || l->done)
		return INBOX_ERR_INVALID;
	inbox_consumer *c = l->c;
	inbox_store *st = c->st;
	int dead = l->attempt >= c->max_attempts;
	int rc = st->vt->begin(st);
	if (rc >= 0)
		rc = fenced_finish(l, INBOX_ST_PROCESSING,
		                   dead ? INBOX_ST_DEAD : INBOX_ST_FAILED,
		                   l->attempt);
	if (rc >= 0 && dead) {
		char reason[600];
		int64_t id;
		snprintf(reason, sizeof(reason),
		         "max attempts (%d) reached: %s", c->max_attempts,
		         why ? why : "failed");
		rc = inbox__write_dead_letter(c, &l->msg, reason, l->attempt,
		                              NULL, &id);
	}
	if (rc >= 0)
		rc = st->vt->commit(st);
	if (rc < 0 && st->in_txn)
		st->vt->rollback(st);
	if (rc == INBOX_ERR_FENCED)
		c->stats.fenced++;
	if (rc < 0)
		return rc;
	l->done = 1;
	inbox__observe(c, dead ? INBOX_DEAD_LETTERED : INBOX_RETRY, -1.0, 0);
	return INBOX_OK;
}
