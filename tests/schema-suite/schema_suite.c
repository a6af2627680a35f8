/*
 * The official JSON Schema Test Suite, draft 7, against src/schema/.
 *
 *   schema_suite [DIR]   DIR = .../json-schema-test-suite/tests/draft7
 *
 * Every file of the suite is classified below:
 *   RUN      every test case runs; any failure fails the run. (Files under
 *            optional/ whose feature we support run too: we claim them.)
 *   REFUSED  the file exercises something we deliberately do not support
 *            (remote references, content*, some formats). We do not skip
 *            it silently: every one of its schemas must be *refused* at
 *            compile time, which is what a consumer would see at start-up.
 * A file of the suite that is in neither list fails the run, so a newer
 * suite cannot be half-tested without anyone noticing.
 *
 * Inside RUN files, the groups in SKIPS are schemas we refuse by design
 * (each with its reason); they are checked to be refused as well.
 *
 * Prints one line per file (passed/failed/refused) and the totals, then
 * the usual "N passed, N failed" line. Exit 77 when DIR does not exist.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/json.h"
#include "schema/node.h"

typedef enum { RUN, REFUSED } kind;

static const struct {
	const char *file;
	kind k;
	const char *why;    /* REFUSED: why we do not support it */
	const char *expect; /* REFUSED: the compile error must contain it */
} FILES[] = {
    {"additionalItems.json", RUN, NULL, NULL},
    {"additionalProperties.json", RUN, NULL, NULL},
    {"allOf.json", RUN, NULL, NULL},
    {"anyOf.json", RUN, NULL, NULL},
    {"boolean_schema.json", RUN, NULL, NULL},
    {"const.json", RUN, NULL, NULL},
    {"contains.json", RUN, NULL, NULL},
    {"default.json", RUN, NULL, NULL},
    {"definitions.json", RUN, NULL, NULL},
    {"dependencies.json", RUN, NULL, NULL},
    {"enum.json", RUN, NULL, NULL},
    {"exclusiveMaximum.json", RUN, NULL, NULL},
    {"exclusiveMinimum.json", RUN, NULL, NULL},
    {"if-then-else.json", RUN, NULL, NULL},
    {"items.json", RUN, NULL, NULL},
    {"maxItems.json", RUN, NULL, NULL},
    {"maxLength.json", RUN, NULL, NULL},
    {"maxProperties.json", RUN, NULL, NULL},
    {"maximum.json", RUN, NULL, NULL},
    {"minItems.json", RUN, NULL, NULL},
    {"minLength.json", RUN, NULL, NULL},
    {"minProperties.json", RUN, NULL, NULL},
    {"minimum.json", RUN, NULL, NULL},
    {"multipleOf.json", RUN, NULL, NULL},
    {"not.json", RUN, NULL, NULL},
    {"oneOf.json", RUN, NULL, NULL},
    {"pattern.json", RUN, NULL, NULL},
    {"patternProperties.json", RUN, NULL, NULL},
    {"properties.json", RUN, NULL, NULL},
    {"propertyNames.json", RUN, NULL, NULL},
    {"ref.json", RUN, NULL, NULL},
    {"required.json", RUN, NULL, NULL},
    {"type.json", RUN, NULL, NULL},
    {"uniqueItems.json", RUN, NULL, NULL},
    {"refRemote.json", REFUSED,
     "remote references: we never fetch schemas, a $ref must stay inside "
     "the schema document",
     "remote $ref"},
    {"optional/bignum.json", RUN, NULL, NULL},
    {"optional/ecmascript-regex.json", RUN, NULL, NULL},
    {"optional/zeroTerminatedFloats.json", RUN, NULL, NULL},
    {"optional/content.json", REFUSED,
     "contentMediaType/contentEncoding are not supported",
     "unsupported keyword \"content"},
    {"optional/format/date-time.json", RUN, NULL, NULL},
    {"optional/format/date.json", RUN, NULL, NULL},
    {"optional/format/time.json", RUN, NULL, NULL},
    {"optional/format/email.json", RUN, NULL, NULL},
    {"optional/format/hostname.json", RUN, NULL, NULL},
    {"optional/format/ipv4.json", RUN, NULL, NULL},
    {"optional/format/ipv6.json", RUN, NULL, NULL},
    {"optional/format/uri.json", RUN, NULL, NULL},
    {"optional/format/uri-reference.json", RUN, NULL, NULL},
    {"optional/format/json-pointer.json", RUN, NULL, NULL},
    {"optional/format/relative-json-pointer.json", RUN, NULL, NULL},
    {"optional/format/regex.json", RUN, NULL, NULL},
    {"optional/format/idn-email.json", REFUSED,
     "format idn-email is not supported (unknown formats are refused)",
     "unknown format"},
    {"optional/format/idn-hostname.json", REFUSED,
     "format idn-hostname is not supported", "unknown format"},
    {"optional/format/iri.json", REFUSED, "format iri is not supported",
     "unknown format"},
    {"optional/format/iri-reference.json", REFUSED,
     "format iri-reference is not supported", "unknown format"},
    {"optional/format/uri-template.json", REFUSED,
     "format uri-template is not supported", "unknown format"},
};

/* Groups of RUN files that we refuse at compile time on purpose. */
static const struct {
	const char *file;
	const char *group; /* the group's "description" */
	const char *why;
	const char *expect; /* the compile error must contain it */
} SKIPS[] = {
    {"ref.json", "ref overrides any sibling keywords",
     "draft 7 ignores keywords beside $ref; we refuse such a schema "
     "rather than silently not enforce \"maxItems\" (use allOf)",
     "beside \"$ref\""},
    {"ref.json", "remote ref, containing refs itself",
     "$ref to the draft-07 meta-schema by URL: a remote reference",
     "remote $ref"},
    {"definitions.json", "valid definition",
     "$ref to the draft-07 meta-schema by URL: a remote reference",
     "remote $ref"},
    {"definitions.json", "invalid definition",
     "$ref to the draft-07 meta-schema by URL: a remote reference",
     "remote $ref"},
};

static int total_pass, total_fail, total_refused, files_bad;

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t cap = 0, n = 0, r;
	do {
		if (n + 4096 > cap) {
			cap = cap ? cap * 2 : 65536;
			char *p = realloc(buf, cap);
			if (!p) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = p;
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
	} while (r > 0);
	fclose(f);
	*len = n;
	return buf;
}

/* The expected refusal of a group we skip, or NULL. */
static const char *skip_expect(const char *file, const char *group)
{
	for (size_t i = 0; i < sizeof(SKIPS) / sizeof(SKIPS[0]); i++)
		if (!strcmp(SKIPS[i].file, file) &&
		    !strcmp(SKIPS[i].group, group))
			return SKIPS[i].expect;
	return NULL;
}

static void run_file(const char *dir, const char *file, kind k,
                     const char *file_expect)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	size_t len;
	char *text = slurp(path, &len);
	json_t *doc = NULL;
	char err[512];
	if (!text || inbox__json_parse(text, len, &doc, err, sizeof(err))) {
		printf("FAIL %s: cannot read: %s\n", file,
		       text ? err : strerror(errno));
		free(text);
		files_bad++;
		return;
	}
	free(text);
	int pass = 0, fail = 0, refused = 0;
	size_t gi;
	json_t *g;
	json_array_foreach(doc, gi, g)
	{
		const char *gdesc =
		    json_string_value(json_object_get(g, "description"));
		json_t *tests = json_object_get(g, "tests");
		size_t ntests = json_array_size(tests);
		const char *why =
		    k == REFUSED ? file_expect : skip_expect(file, gdesc);
		inbox_schema *s = NULL;
		int rc = inbox__schema_compile(&s, json_object_get(g, "schema"),
		                               err, sizeof(err));
		if (why) {
			/* Refused by design: it must really be refused,
			 * and for that reason. */
			if (rc == 0 || !strstr(err, why)) {
				printf("  FAIL %s / %s: expected a refusal "
				       "with \"%s\", got %s\n",
				       file, gdesc, why,
				       rc == 0 ? "a compiled schema" : err);
				fail += (int)ntests;
			} else {
				printf("  refused %s / %s (%d cases): %s\n",
				       file, gdesc, (int)ntests, err);
				refused += (int)ntests;
			}
			inbox_schema_close(s);
			continue;
		}
		if (rc != 0) {
			printf("  FAIL %s / %s: schema refused: %s\n", file,
			       gdesc, err);
			fail += (int)ntests;
			continue;
		}
		size_t ti;
		json_t *t;
		json_array_foreach(tests, ti, t)
		{
			char reason[512] = "";
			int want = json_is_true(json_object_get(t, "valid"));
			json_t *data = json_object_get(t, "data");
			int got = inbox__schema_check(s, data, 0, reason,
			                              sizeof(reason)) == 0;
			/* and the same without the validator's memo */
			s->memo_off = 1;
			int plain =
			    inbox__schema_check(s, data, 0, NULL, 0) == 0;
			s->memo_off = 0;
			if (plain != got)
				snprintf(reason, sizeof(reason),
				         "(differs without the memo)");
			if (got == want && plain == got) {
				pass++;
				continue;
			}
			fail++;
			printf("  FAIL %s / %s / %s: expected %s, got %s%s%s\n",
			       file, gdesc,
			       json_string_value(
			           json_object_get(t, "description")),
			       want ? "valid" : "invalid",
			       got ? "valid" : "invalid", got ? "" : ": ",
			       got ? "" : reason);
		}
		inbox_schema_close(s);
	}
	json_decref(doc);
	printf("%-44s %3d passed, %d failed, %d refused by design\n", file,
	       pass, fail, refused);
	total_pass += pass;
	total_fail += fail;
	total_refused += refused;
	if (fail)
		files_bad++;
}

/* Every .json under dir (and optional/, optional/format/) must be listed. */
static int unlisted(const char *dir, const char *sub)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s%s%s", dir, sub[0] ? "/" : "", sub);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	int bad = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n < 6 || strcmp(e->d_name + n - 5, ".json"))
			continue;
		char rel[1024];
		snprintf(rel, sizeof(rel), "%s%s%s", sub, sub[0] ? "/" : "",
		         e->d_name);
		size_t i;
		for (i = 0; i < sizeof(FILES) / sizeof(FILES[0]); i++)
			if (!strcmp(FILES[i].file, rel))
				break;
		if (i == sizeof(FILES) / sizeof(FILES[0])) {
			printf("FAIL %s is not classified in schema_suite.c "
			       "(RUN or REFUSED)\n",
			       rel);
			bad++;
		}
	}
	closedir(d);
	return bad;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1]
	                           : "/usr/share/json-schema-test-suite/tests/"
	                             "draft7";
	struct stat st;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		printf("skip: %s not found (apt-get install "
		       "json-schema-test-suite)\n",
		       dir);
		return 77;
	}
	printf("JSON Schema Test Suite, draft 7: %s\n", dir);
	int missing = 0;
	for (size_t i = 0; i < sizeof(FILES) / sizeof(FILES[0]); i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", dir, FILES[i].file);
		if (stat(path, &st) != 0) {
			printf("FAIL %s: listed but missing from the suite\n",
			       FILES[i].file);
			missing++;
			continue;
		}
		if (FILES[i].k == REFUSED)
			printf("%-44s refused by design: %s\n", FILES[i].file,
			       FILES[i].why);
		run_file(dir, FILES[i].file, FILES[i].k, FILES[i].expect);
	}
	int bad = unlisted(dir, "") + unlisted(dir, "optional") +
	          unlisted(dir, "optional/format") + missing;
	printf("total: %d cases passed, %d failed, %d refused by design "
	       "(checked to be refused)\n",
	       total_pass, total_fail, total_refused);
	int failed = files_bad + bad;
	printf("%d passed, %d failed\n",
	       (int)(sizeof(FILES) / sizeof(FILES[0])) - files_bad - missing,
	       failed);
	return failed ? 1 : 0;
}
