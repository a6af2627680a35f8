/* The compiler's state, shared by compile.c (the walk, $id/$ref, checks)
 * and compile_kw.c (one function per keyword). */
#ifndef INBOX_SCHEMA_COMPILE_H
#define INBOX_SCHEMA_COMPILE_H

#include "base/json.h"
#include "schema/node.h"

typedef struct pending_ref {
	sch_node *from;
	const char *raw; /* as written, borrowed from the document */
	char *uri;       /* resolved against the base */
} pending_ref;

/* A resource (the document, an $id) or a plain-name identifier. */
typedef struct id_entry {
	char *uri; /* without fragment, or "uri#name" */
	json_t *json;
	char *path;
	char *base; /* base URI inside it */
} id_entry;

typedef struct unknown_kw {
	const char *name; /* borrowed */
	sch_node *node;   /* the schema object it appears in */
	char *member_path;
} unknown_kw;

typedef struct cctx {
	inbox_schema *s;
	char *err;
	size_t errlen;
	int failed, nomem;
	pending_ref *refs;
	size_t nrefs, caprefs;
	id_entry *ids;
	size_t nids, capids;
	unknown_kw *unknown;
	size_t nunknown, capunknown;
	char **fresh; /* paths of $ref targets compiled on demand */
	size_t nfresh, capfresh;
} cctx;

/* compile.c */
sch_node *sch__compile_node(cctx *x, json_t *v, const char *path,
                            const char *base);
int sch__fail(cctx *x, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
int sch__nomem(cctx *x);
int sch__grow(cctx *x, void **arr, size_t *cap, size_t need, size_t elem);
/* path + "/" + escaped token, malloc'ed (NULL: NOMEM, reported). */
char *sch__path_join(cctx *x, const char *path, const char *tok, size_t len);
/* "(root)" for "". */
const char *sch__where(const char *path);
/* Remember a member we do not know; refused later unless a $ref uses
 * what it contains. */
int sch__unknown(cctx *x, sch_node *n, const char *k);
void sch__node_free(sch_node *n);

/* compile_kw.c */
/* Compile keyword k with value v into n. 0 or -1. */
int sch__keyword(cctx *x, sch_node *n, const char *k, json_t *v,
                 const char *base);
/* Checks across keywords once all are read (sort tables). */
int sch__keywords_done(cctx *x, sch_node *n);

#endif
