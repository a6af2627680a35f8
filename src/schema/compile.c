/*
 * Compiling a schema: walk the document once, check every keyword's value
 * and turn it into a node (compile_kw.c handles the keywords one by one),
 * then resolve the $refs, check that unknown members are only containers
 * of referenced subschemas, and refuse $ref cycles that would recurse
 * without descending into the instance.
 *
 * References: $id changes the base URI (RFC 3986); a $ref is resolved
 * against it and must land inside this document (the root, an $id of
 * one of its subschemas, plus a JSON pointer fragment or a plain name).
 * Anything else is a remote reference: refused, we never fetch.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/compile.h"

#include "base/url.h"

/* ---- errors ----------------------------------------------------------- */

const char *sch__where(const char *path)
{
	return path[0] ? path : "(root)";
}

int sch__fail(cctx *x, const char *fmt, ...)
{
	if (x->failed)
		return -1; /* keep the first, most precise, message */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->err, x->errlen, fmt, ap);
	va_end(ap);
	x->failed = 1;
	return -1;
}

int sch__nomem(cctx *x)
{
	if (!x->failed)
		x->nomem = 1;
	return sch__fail(x, "out of memory");
}

int sch__grow(cctx *x, void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap * 2 : 8;
	while (n < need)
		n *= 2;
	void *p = realloc(*arr, n * elem);
	if (!p)
		return sch__nomem(x);
	*arr = p;
	*cap = n;
	return 0;
}

char *sch__path_join(cctx *x, const char *path, const char *tok, size_t len)
{
	inbox__buf b = INBOX__BUF_INIT;
	if (inbox__buf_puts(&b, path) < 0 ||
	    sch__ptr_append(&b, tok, len) < 0) {
		inbox__buf_free(&b);
		sch__nomem(x);
		return NULL;
	}
	return b.data;
}

/* ---- nodes ------------------------------------------------------------ */

static sch_node *new_node(cctx *x, json_t *v, const char *path,
                          const char *base)
{
	sch_node *n = calloc(1, sizeof(*n));
	if (!n) {
		sch__nomem(x);
		return NULL;
	}
	n->next_alloc = x->s->nodes;
	x->s->nodes = n;
	n->json = v;
	n->boolean = -1;
	n->max_length = n->max_items = n->max_props = SIZE_MAX;
	n->path = strdup(path);
	n->base = strdup(base);
	if (!n->path || !n->base) {
		sch__nomem(x);
		return NULL;
	}
	return n;
}

void sch__node_free(sch_node *n)
{
	free(n->path);
	free(n->base);
	free(n->props);
	free(n->quick);
	free(n->pprops);
	free(n->required);
	for (size_t i = 0; i < n->ndeps; i++)
		free(n->deps[i].required);
	free(n->deps);
	free(n->tuple);
	free(n->all_of);
	free(n->any_of);
	free(n->one_of);
	free(n);
}

/* ---- $id --------------------------------------------------------------- */

static id_entry *find_id(cctx *x, const char *uri, size_t len)
{
	for (size_t i = 0; i < x->nids; i++)
		if (strlen(x->ids[i].uri) == len &&
		    memcmp(x->ids[i].uri, uri, len) == 0)
			return &x->ids[i];
	return NULL;
}

static int add_id(cctx *x, const char *uri, size_t len, json_t *v,
                  const char *path, const char *base)
{
	id_entry *e = find_id(x, uri, len);
	if (e) {
		if (e->json == v)
			return 0;
		return sch__fail(x, "duplicate $id \"%.*s\" at %s (also at %s)",
		                 (int)len, uri, sch__where(path),
		                 sch__where(e->path));
	}
	if (sch__grow(x, (void **)&x->ids, &x->capids, x->nids + 1,
	              sizeof(*x->ids)))
		return -1;
	e = &x->ids[x->nids];
	memset(e, 0, sizeof(*e));
	e->uri = strndup(uri, len);
	e->path = strdup(path);
	e->base = strdup(base);
	e->json = v;
	x->nids++;
	if (!e->uri || !e->path || !e->base)
		return sch__nomem(x);
	return 0;
}

/* Apply "$id": register it and compute the base URI of this schema.
 * *newbase is malloc'ed. */
static int apply_id(cctx *x, json_t *obj, const char *path, const char *base,
                    char **newbase)
{
	*newbase = NULL;
	json_t *id = json_object_get(obj, "$id");
	if (!id) {
		*newbase = strdup(base);
		return *newbase ? 0 : sch__nomem(x);
	}
	if (!json_is_string(id))
		return sch__fail(
		    x, "invalid schema at %s/$id: must be a string", path);
	char *abs = sch__uri_resolve(base, json_string_value(id));
	if (!abs)
		return sch__nomem(x);
	char *hash = strchr(abs, '#');
	int rc;
	if (hash && hash[1]) {
		/* "#name" (or "uri#name"): a plain-name identifier; the base
		 * is the URI without it. */
		char *doc = strndup(abs, (size_t)(hash - abs));
		rc = doc ? add_id(x, abs, strlen(abs), obj, path, doc)
		         : sch__nomem(x);
		free(doc);
		*hash = '\0';
	} else {
		if (hash)
			*hash = '\0';
		rc = add_id(x, abs, strlen(abs), obj, path, abs);
	}
	if (rc) {
		free(abs);
		return -1;
	}
	*newbase = abs;
	return 0;
}

/* ---- $schema ------------------------------------------------------------ */

static int check_dialect(cctx *x, json_t *obj, const char *path)
{
	json_t *v = json_object_get(obj, "$schema");
	if (!v)
		return 0;
	static const char *const DRAFT7[] = {
	    "http://json-schema.org/draft-07/schema#",
	    "http://json-schema.org/draft-07/schema",
	    "https://json-schema.org/draft-07/schema#",
	    "https://json-schema.org/draft-07/schema"};
	if (json_is_string(v))
		for (size_t i = 0; i < sizeof(DRAFT7) / sizeof(DRAFT7[0]); i++)
			if (strcmp(json_string_value(v), DRAFT7[i]) == 0)
				return 0;
	char shown[120];
	sch__render(shown, sizeof(shown), v, 80);
	return sch__fail(x,
	                 "unsupported $schema %s at %s: only draft 7 "
	                 "(\"http://json-schema.org/draft-07/schema#\") is "
	                 "supported",
	                 shown, sch__where(path));
}

/* ---- $ref --------------------------------------------------------------- */

/* What may stand beside "$ref": draft 7 ignores every sibling, so only
 * annotations and containers (never an assertion we would silently
 * skip). */
static int ref_sibling_ok(const char *k, int at_root)
{
	static const char *const OK[] = {
	    "$ref",    "$schema",  "$comment", "title",     "description",
	    "default", "examples", "readOnly", "writeOnly", "definitions"};
	for (size_t i = 0; i < sizeof(OK) / sizeof(OK[0]); i++)
		if (strcmp(k, OK[i]) == 0)
			return 1;
	/* At the root "$id" names the document; for a fragment-only $ref the
	 * ignored and the honored readings agree. */
	return at_root && strcmp(k, "$id") == 0;
}

static int compile_ref(cctx *x, sch_node *n, json_t *obj, json_t *ref,
                       const char *base)
{
	const char *k;
	json_t *v;
	if (!json_is_string(ref))
		return sch__fail(
		    x, "invalid schema at %s/$ref: must be a string", n->path);
	json_object_foreach(obj, k, v)
	{
		if (!ref_sibling_ok(k, n->path[0] == '\0'))
			return sch__fail(
			    x,
			    "keyword \"%s\" beside \"$ref\" at %s: draft 7 "
			    "ignores it; combine them with \"allOf\": "
			    "[{\"$ref\": ...}, {\"%s\": ...}]",
			    k, sch__where(n->path), k);
		if (strcmp(k, "$ref") && strcmp(k, "$schema") &&
		    strcmp(k, "$id") && sch__keyword(x, n, k, v, base) < 0)
			return -1;
	}
	if (sch__grow(x, (void **)&x->refs, &x->caprefs, x->nrefs + 1,
	              sizeof(*x->refs)))
		return -1;
	pending_ref *r = &x->refs[x->nrefs];
	r->from = n;
	r->raw = json_string_value(ref);
	r->uri = sch__uri_resolve(base, r->raw);
	if (!r->uri)
		return sch__nomem(x);
	x->nrefs++;
	return 0;
}

static sch_node *find_node(cctx *x, const json_t *v)
{
	if (!json_is_object(v))
		return NULL; /* true/false are shared singletons in jansson */
	for (sch_node *n = x->s->nodes; n; n = n->next_alloc)
		if (n->json == v)
			return n;
	return NULL;
}

static int resolve_ref(cctx *x, pending_ref *r)
{
	const char *uri = r->uri;
	const char *hash = strchr(uri, '#');
	size_t doclen = hash ? (size_t)(hash - uri) : strlen(uri);
	const char *frag = hash ? hash + 1 : "";
	const char *at = sch__where(r->from->path);
	json_t *target;
	id_entry *e;
	char *tpath = NULL;
	if (frag[0] && frag[0] != '/') {
		e = find_id(x, uri, strlen(uri));
		if (!e)
			goto unresolved;
		target = e->json;
		tpath = strdup(e->path);
	} else {
		e = find_id(x, uri, doclen);
		if (!e)
			goto unresolved;
		/* The pointer is percent-decoded; an escape of NUL is refused
		 * like any other malformed one. */
		char *ptr = NULL;
		int drc = inbox__url_decode(&ptr, frag, strlen(frag));
		if (drc == INBOX_ERR_NOMEM)
			return sch__nomem(x);
		if (drc != INBOX_OK || !inbox__pointer_valid(ptr)) {
			free(ptr);
			return sch__fail(
			    x,
			    "$ref \"%s\" at %s: the fragment is not "
			    "a JSON pointer",
			    r->raw, at);
		}
		target = ptr[0] ? inbox__pointer_get(e->json, ptr) : e->json;
		size_t elen = strlen(e->path), plen = strlen(ptr);
		tpath = malloc(elen + plen + 1);
		if (tpath) {
			memcpy(tpath, e->path, elen);
			memcpy(tpath + elen, ptr, plen + 1);
		}
		free(ptr);
		if (!target) {
			free(tpath);
			return sch__fail(
			    x,
			    "$ref \"%s\" at %s points to nothing in "
			    "the schema",
			    r->raw, at);
		}
	}
	if (!tpath)
		return sch__nomem(x);
	sch_node *t = find_node(x, target);
	if (!t) {
		/* Not walked yet: inside a member we do not know as a
		 * keyword (a container of subschemas), or a boolean. */
		if (sch__grow(x, (void **)&x->fresh, &x->capfresh,
		              x->nfresh + 1, sizeof(*x->fresh))) {
			free(tpath);
			return -1;
		}
		x->fresh[x->nfresh++] = tpath;
		t = sch__compile_node(x, target, tpath, e->base);
		if (!t)
			return -1;
	} else {
		free(tpath);
	}
	r->from->ref = t;
	return 0;
unresolved:
	return sch__fail(x,
	                 "remote $ref \"%s\" at %s is not supported: only "
	                 "references inside the schema (\"#\", "
	                 "\"#/definitions/name\", or an $id of one of its "
	                 "subschemas)",
	                 r->raw, at);
}

/* ---- unknown members ----------------------------------------------------- */

int sch__unknown(cctx *x, sch_node *n, const char *k)
{
	if (sch__grow(x, (void **)&x->unknown, &x->capunknown, x->nunknown + 1,
	              sizeof(*x->unknown)))
		return -1;
	unknown_kw *u = &x->unknown[x->nunknown];
	u->name = k;
	u->node = n;
	u->member_path = sch__path_join(x, n->path, k, strlen(k));
	if (!u->member_path)
		return -1;
	x->nunknown++;
	return 0;
}

/* An unknown member is acceptable only as the container of a subschema
 * that a $ref uses (the suite's {"tilda~field": {...}} and $ref
 * "#/tilda~0field"): then it is not ignored, it is referenced. */
static int check_unknown(cctx *x)
{
	for (size_t i = 0; i < x->nunknown; i++) {
		const unknown_kw *u = &x->unknown[i];
		size_t ml = strlen(u->member_path);
		int used = 0;
		for (size_t j = 0; j < x->nfresh && !used; j++)
			used =
			    strncmp(x->fresh[j], u->member_path, ml) == 0 &&
			    (x->fresh[j][ml] == '\0' || x->fresh[j][ml] == '/');
		if (!used)
			return sch__fail(
			    x,
			    "schema uses unsupported keyword \"%s\" "
			    "at %s",
			    u->name, sch__where(u->node->path));
	}
	return 0;
}

/* ---- cycles ----------------------------------------------------------------
 */

/* Edges that validate the same instance (no descent). A cycle of them
 * would recurse forever. */
static int cycle_from(cctx *x, sch_node *n);

static int cycle_edge(cctx *x, sch_node *to)
{
	if (!to)
		return 0;
	if (to->color == 1)
		return sch__fail(x,
		                 "$ref cycle through %s never descends into "
		                 "the message (it would recurse forever)",
		                 sch__where(to->path));
	return to->color == 0 ? cycle_from(x, to) : 0;
}

static int cycle_list(cctx *x, sch_node **l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (cycle_edge(x, l[i]))
			return -1;
	return 0;
}

static int cycle_from(cctx *x, sch_node *n)
{
	n->color = 1;
	if (cycle_edge(x, n->ref) || cycle_list(x, n->all_of, n->nall_of) ||
	    cycle_list(x, n->any_of, n->nany_of) ||
	    cycle_list(x, n->one_of, n->none_of) ||
	    cycle_edge(x, n->not_schema) || cycle_edge(x, n->if_schema) ||
	    cycle_edge(x, n->then_schema) || cycle_edge(x, n->else_schema))
		return -1;
	for (size_t i = 0; i < n->ndeps; i++)
		if (cycle_edge(x, n->deps[i].node))
			return -1;
	n->color = 2;
	return 0;
}

/* ---- the walk
 * ---------------------------------------------------------------- */

sch_node *sch__compile_node(cctx *x, json_t *v, const char *path,
                            const char *base)
{
	if (json_is_boolean(v)) {
		sch_node *n = new_node(x, v, path, base);
		if (n)
			n->boolean = json_is_true(v);
		return n;
	}
	if (!json_is_object(v)) {
		char shown[80];
		sch__render(shown, sizeof(shown), v, 40);
		sch__fail(x,
		          "invalid schema at %s: a schema must be an object or "
		          "a boolean, not %s",
		          sch__where(path), shown);
		return NULL;
	}
	if (check_dialect(x, v, path))
		return NULL;
	char *mybase;
	if (apply_id(x, v, path, base, &mybase))
		return NULL;
	sch_node *n = new_node(x, v, path, mybase);
	if (!n) {
		free(mybase);
		return NULL;
	}
	json_t *ref = json_object_get(v, "$ref");
	int rc;
	if (ref) {
		rc = compile_ref(x, n, v, ref, mybase);
	} else {
		const char *k;
		json_t *kv;
		rc = 0;
		json_object_foreach(v, k, kv)
		{
			if ((rc = sch__keyword(x, n, k, kv, mybase)) < 0)
				break;
		}
		if (!rc)
			rc = sch__keywords_done(x, n);
	}
	free(mybase);
	return rc < 0 ? NULL : n;
}

/* The validator remembers its results at the $ref targets that can meet
 * the same instance value more than once (memo.c). Apart from its $ref
 * edges the schema is a tree, in which a node meets a value at most once
 * per visit of the subtree's top; so a target with a single $ref to it is
 * visited as often as that $ref's node — by induction from the root (one
 * visit), at most once per value. Only targets with two or more
 * references (counting the root's own entry) need the memo. */
static void number_memo_targets(inbox_schema *s)
{
	s->root->refs_in = 1;
	for (sch_node *n = s->nodes; n; n = n->next_alloc)
		if (n->ref)
			n->ref->refs_in++;
	for (sch_node *n = s->nodes; n; n = n->next_alloc)
		if (n->refs_in >= 2)
			n->memo_id = ++s->nmemo;
}

/* A schema that looks at the value alone: nothing below it, no $ref. */
static int flat(const sch_node *n)
{
	return n->boolean >= 0 ||
	       (!n->ref && !n->nprops && !n->npprops && !n->additional_props &&
	        !n->property_names && !n->ndeps && !n->items && !n->has_tuple &&
	        !n->contains && !n->nall_of && !n->nany_of && !n->none_of &&
	        !n->not_schema && !n->if_schema);
}

/* The properties to check first when only a yes/no is wanted: the flat
 * ones, when some others are not (a discriminator beside the payload). */
static int quick_props(cctx *x, sch_node *n)
{
	size_t m = 0;
	for (size_t i = 0; i < n->nprops; i++)
		m += flat(n->props[i].node);
	if (m == 0 || m == n->nprops)
		return 0;
	n->quick = calloc(m, sizeof(*n->quick));
	if (!n->quick)
		return sch__nomem(x);
	for (size_t i = 0; i < n->nprops; i++)
		if (flat(n->props[i].node))
			n->quick[n->nquick++] = n->props[i];
	return 0;
}

static void cctx_free(cctx *x)
{
	for (size_t i = 0; i < x->nrefs; i++)
		free(x->refs[i].uri);
	free(x->refs);
	for (size_t i = 0; i < x->nids; i++) {
		free(x->ids[i].uri);
		free(x->ids[i].path);
		free(x->ids[i].base);
	}
	free(x->ids);
	for (size_t i = 0; i < x->nunknown; i++)
		free(x->unknown[i].member_path);
	free(x->unknown);
	for (size_t i = 0; i < x->nfresh; i++)
		free(x->fresh[i]);
	free(x->fresh);
}

static int compile_all(cctx *x, json_t *doc)
{
	/* The document itself, whatever its $id: where "#..." lands when
	 * there is no base URI. */
	if (add_id(x, "", 0, doc, "", ""))
		return -1;
	x->s->root = sch__compile_node(x, doc, "", "");
	if (!x->s->root)
		return -1;
	/* Resolving may compile more (targets inside unknown members),
	 * which may add references: loop until none is pending. */
	for (size_t i = 0; i < x->nrefs; i++)
		if (resolve_ref(x, &x->refs[i]))
			return -1;
	if (check_unknown(x))
		return -1;
	for (sch_node *n = x->s->nodes; n; n = n->next_alloc)
		if (n->color == 0 && cycle_from(x, n))
			return -1;
	number_memo_targets(x->s);
	for (sch_node *n = x->s->nodes; n; n = n->next_alloc)
		if (quick_props(x, n))
			return -1;
	return 0;
}

int inbox__schema_compile(inbox_schema **out, json_t *doc, char *err,
                          size_t errlen)
{
	char dummy[8];
	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	*out = NULL;
	inbox_schema *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->doc = json_incref(doc);
	cctx x = {.s = s, .err = err, .errlen = errlen};
	int rc = sch__regex_init(s) ? sch__nomem(&x) : compile_all(&x, doc);
	cctx_free(&x);
	if (rc) {
		inbox_schema_close(s);
		return x.nomem ? INBOX_ERR_NOMEM : INBOX_ERR_INVALID;
	}
	*out = s;
	return INBOX_OK;
}

void inbox_schema_close(inbox_schema *s)
{
	if (!s)
		return;
	while (s->nodes) {
		sch_node *n = s->nodes->next_alloc;
		sch__node_free(s->nodes);
		s->nodes = n;
	}
	sch__regex_free_all(s);
	sch__memo_free(&s->memo);
	json_decref(s->doc);
	free(s);
}

int inbox_schema_open(inbox_schema **out, const char *schema, size_t len,
                      char *err, size_t errlen)
{
	char dummy[8], why[400];
	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (!out)
		return INBOX_ERR_INVALID;
	*out = NULL;
	if (!schema) {
		snprintf(err, errlen, "no schema text");
		return INBOX_ERR_INVALID;
	}
	json_t *doc;
	int rc = inbox__json_parse(schema, len, &doc, why, sizeof(why));
	if (rc == INBOX_ERR_NOMEM) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	if (rc != 0) {
		snprintf(err, errlen, "schema is not valid JSON: %s", why);
		return INBOX_ERR_INVALID;
	}
	rc = inbox__schema_compile(out, doc, err, errlen);
	json_decref(doc);
	return rc;
}
