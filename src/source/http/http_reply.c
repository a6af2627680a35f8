/*
 * HTTP source: the answer to a request, from its result after the commit.
 *
 * api mode
 *   APPLIED, STALE      c->status; the stored result (its bytes, its
 *                       content type) or {"key":K,"outcome":"applied"}
 *   DUPLICATE           the first processing's answer, the same bytes,
 *                       with Idempotent-Replayed: true
 *   CONFLICT            422 problem: the key was used for another request
 *   DEAD_LETTERED       422 problem: rejected (schema, effect), its reason
 *   IN_PROGRESS         409 problem + Retry-After
 *   RETRY, no result    503 problem + Retry-After; nothing was stored
 * webhook modes: 200 for what may be acked (applied, duplicate, and what
 * was dead-lettered: kept, a retry would change nothing), 503 otherwise.
 *
 * What only stored results give (a duplicate's first answer) is read in
 * stored(), the one place that knows the result's version 2 fields.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>
#include <stdlib.h>

#include "source/common.h"
#include "source/http/http.h"

#define PROBLEM_TYPE "application/problem+json"
/* A result with response headers (src/effect/decl.h spells the same):
 * {"headers":{NAME:VALUE,...},"body":BODY}, BODY JSON or null. */
#define HTTP_RESULT_TYPE "application/vnd.inbox.http-response+json"

typedef struct stored_result {
	const void *p;
	size_t n;
	const char *type;
	inbox_outcome first;
	char *own; /* the body of an HTTP result, freed by the caller */
} stored_result;

/* An HTTP result: its headers into req->xhdr ("name\0value\0"...), its
 * body (compact, in stored order) in s; what cannot be read is kept as
 * stored, under its own type. Deterministic: the first answer and every
 * replay are made here from the same stored bytes. */
static void unwrap(http_req *req, stored_result *s)
{
	json_t *j = json_loadb(s->p, s->n, 0, NULL);
	json_t *h = j ? json_object_get(j, "headers") : NULL;
	json_t *b = j ? json_object_get(j, "body") : NULL;
	if (!json_is_object(h) || !b) {
		json_decref(j);
		return;
	}
	const char *k;
	json_t *v;
	json_object_foreach(h, k, v) if (json_is_string(v))
	{
		inbox__buf_append(&req->xhdr, k, strlen(k) + 1);
		inbox__buf_append(&req->xhdr, json_string_value(v),
		                  strlen(json_string_value(v)) + 1);
	}
	if (json_is_null(b)) {
		s->p = NULL;
		s->n = 0;
	} else {
		s->own = json_dumps(b, JSON_COMPACT | JSON_PRESERVE_ORDER |
		                           JSON_ENCODE_ANY);
		s->p = s->own;
		s->n = s->own ? strlen(s->own) : 0;
		s->type = "application/json";
	}
	json_decref(j);
}

static void stored(const inbox_result *r, stored_result *s)
{
	memset(s, 0, sizeof(*s));
	s->first = r->outcome == INBOX_DUPLICATE ? INBOX_APPLIED : r->outcome;
#if INBOX_RESULT_VERSION >= 2
	if (r->version >= 2) {
		s->p = r->result;
		s->n = r->result_len;
		s->type = r->result_type;
		if (r->outcome == INBOX_DUPLICATE &&
		    r->first_outcome != INBOX_OUTCOME_NONE)
			s->first = r->first_outcome;
	}
#endif
}

void inbox__http_problem(http_req *req, unsigned status, const char *title,
                         const char *detail)
{
	inbox__buf *b = &req->resp;
	inbox__buf_reset(b);
	inbox__buf_reset(&req->xhdr); /* no stored header on a problem */
	req->status = status;
	req->resp_type = PROBLEM_TYPE;
	/* NOMEM here leaves a short body: MHD still answers the status */
	inbox__buf_puts(b, "{\"type\":\"about:blank\",\"title\":");
	inbox__src_json_text(b, title, strlen(title), 0);
	inbox__buf_printf(b, ",\"status\":%u", status);
	if (detail) {
		inbox__buf_puts(b, ",\"detail\":");
		inbox__src_json_text(b, detail, strlen(detail), 0);
	}
	inbox__buf_puts(b, "}");
}

static void applied(const http_conf *c, http_req *req, const stored_result *s,
                    const char *outcome)
{
	req->status = (unsigned)c->status;
	inbox__buf_reset(&req->resp);
	if (s->p) {
		inbox__buf_append(&req->resp, s->p, s->n);
		req->resp_type = s->type ? s->type : "application/octet-stream";
		return;
	}
	req->resp_type = "application/json";
	inbox__buf_puts(&req->resp, "{\"key\":");
	inbox__src_json_text(&req->resp, req->key, strlen(req->key), 0);
	inbox__buf_printf(&req->resp, ",\"outcome\":\"%s\"}", outcome);
}

/* A rejected request's stored answer (the handler set it, then
 * rejected): 422 with its bytes. */
static void stored_problem(http_req *req, const stored_result *s)
{
	inbox__buf_reset(&req->resp);
	inbox__buf_append(&req->resp, s->p, s->n);
	req->status = 422;
	req->resp_type = s->type ? s->type : PROBLEM_TYPE;
}

static void api_answer(const http_conf *c, http_req *req, const inbox_result *r,
                       stored_result *sp);

static void api_reply(const http_conf *c, http_req *req, const inbox_result *r)
{
	stored_result s;
	stored(r, &s);
	inbox__buf_reset(&req->xhdr);
	if (s.p && s.type && !strcmp(s.type, HTTP_RESULT_TYPE))
		unwrap(req, &s);
	api_answer(c, req, r, &s);
	free(s.own);
}

static void api_answer(const http_conf *c, http_req *req, const inbox_result *r,
                       stored_result *sp)
{
	stored_result s = *sp;
	switch (r->outcome) {
	case INBOX_APPLIED:
	case INBOX_STALE:
		applied(c, req, &s, "applied");
		req->cacheable = 1; /* a completed record: final */
		return;
	case INBOX_DUPLICATE:
		req->replay = 1;
		if (s.first == INBOX_DEAD_LETTERED) {
			if (s.p)
				stored_problem(req, &s);
			else
				inbox__http_problem(
				    req, 422, "Request rejected",
				    "this request was rejected when first "
				    "processed and kept as a dead letter");
			return;
		}
		applied(c, req, &s, "applied");
		req->cacheable = 1;
		return;
	case INBOX_CONFLICT:
		inbox__http_problem(req, 422, "Idempotency key reused",
		                    "this idempotency key was used for another "
		                    "request (method, route or body differ)");
		return;
	case INBOX_DEAD_LETTERED:
		if (s.p) /* the handler's own answer, what a retry replays */
			stored_problem(req, &s);
		else
			inbox__http_problem(req, 422, "Request rejected",
			                    r->reason);
		return;
	case INBOX_IN_PROGRESS:
		inbox__http_problem(req, 409, "Request in progress",
		                    "a request with this idempotency key is "
		                    "being processed; retry later");
		req->retry_after = c->retry_after_s;
		return;
	default:
		inbox__http_problem(req, 503, "Temporarily unavailable",
		                    "nothing was stored; retry later");
		req->retry_after = c->retry_after_s;
		return;
	}
}

void inbox__http_reply(const http_conf *c, http_req *req, const inbox_result *r)
{
	req->outcome = r ? inbox_outcome_name(r->outcome) : "failed";
	req->cacheable = 0;
	if (r && c->mode == HTTP_MODE_API) {
		api_reply(c, req, r);
		return;
	}
	if (r && inbox_outcome_ackable(r->outcome)) {
		req->status = 200;
		req->replay = r->outcome == INBOX_DUPLICATE;
		req->resp_type = "application/json";
		inbox__buf_reset(&req->resp);
		inbox__buf_printf(&req->resp, "{\"outcome\":\"%s\"}",
		                  inbox_outcome_name(r->outcome));
		return;
	}
	inbox__http_problem(req, 503, "Temporarily unavailable",
	                    "nothing was stored; retry later");
	req->retry_after = c->retry_after_s;
}
