/* SQL text of the PostgreSQL store: built once per handle, because the
 * table names depend on its prefix and schema. */
#include <stdlib.h>
#include <string.h>

#include "store/postgres/pg_outbox.h"
#include "store/postgres/pg_store.h"

/* Type OIDs (pg_type.h is a server header; these never change). */
#define OID_BOOL       16
#define OID_BYTEA      17
#define OID_INT8       20
#define OID_INT4       23
#define OID_TEXT       25
#define OID_TEXT_ARRAY 1009
#define OID_BOOL_ARRAY 1000

/* In templates: {T} inbox, {D} dead_letters, {C} consumers,
 * {V} schema_version, {O} outbox, {G} inbox_generations (qualified,
 * quoted), {P} the bare prefix (for index names, inside quotes). */
/* clang-format off */
/* The claim's insert of the keys of t into generation $9 ($5 status,
 * $6 lease ms, t.s the source position of $10: schema v6), and its answer for the keys in `old` (not inserted):
 * their record, MORE restricting or ordering the look-up. */
#define CLAIM_INSERT \
	" INSERT INTO {T} AS x (gen, consumer, key, fingerprint, status," \
	"  attempts, fence, lease_until, message_id, processed_at," \
	"  position)" \
	" SELECT $9, $1, t.k, t.f, $5, 1, 1," \
	"  CASE WHEN $5 = 'processing'" \
	"   THEN now() + $6 * interval '1 millisecond' END," \
	"  t.m, CASE WHEN $5 = 'completed' THEN now() END, t.s"
/* The stored result (schema v5) comes with the record it was found in,
 * whichever generation that is: a duplicate costs no second statement,
 * and a record without a result reads three NULLs. */
#define CLAIM_ANSWER(MORE) \
	" SELECT old.ord, i.status, i.fingerprint, i.attempts, i.fence," \
	"  coalesce(i.lease_until < now(), false)," \
	"  i.result, i.result_type, i.outcome" \
	" FROM old LEFT JOIN LATERAL (SELECT y.status, y.fingerprint," \
	"  y.attempts, y.fence, y.lease_until, y.result, y.result_type," \
	"  y.outcome FROM {T} y" \
	"  WHERE y.consumer = $1 AND y.key = old.k" MORE \
	"  LIMIT 1) i ON true"
static const char *const templates[PGQ_COUNT] = {
	/* Insert every key (in the given order: sorted by the core, so
	 * two batches lock keys in one order), then answer only for the
	 * keys that were not inserted: a key in `ins` is new. LATERAL ...
	 * LIMIT 1 (a no-op on the primary key) keeps it one index probe per
	 * such key, whatever the statistics say: a join over all of the
	 * consumer's rows would grow with the table. A row the probe cannot
	 * see (committed by another transaction while we waited) comes back
	 * with a NULL status and is re-read. */
	/* The inbox is partitioned into generations ({G}, pg_gens.c): new
	 * keys go to the newest one, $9 as the client last read it; older
	 * ones are sealed (no insert can reach them: if $9 was sealed
	 * since, the insert fails and the batch re-runs after a refresh)
	 * and carry a Bloom filter of their keys. $7 says, per key, whether
	 * a filter the client holds (those of generations up to $8) may
	 * contain it. A key is looked up in the sealed generations it may
	 * be in, and in every one between $8 and $9 (no filter loaded
	 * yet); the lookups are pruned to those partitions (OFFSET 0 keeps
	 * each a probe per key, never a hashed scan of a partition), so a
	 * key no filter knows touches nothing but the newest generation.
	 * Keys found there are not inserted. Then as
	 * before: insert in the given order (sorted by the core, so two
	 * batches lock keys in one order), and answer only for the keys
	 * that were not inserted, from their newest record. LATERAL ...
	 * LIMIT 1 keeps it one index probe per generation and key. A row
	 * the lookup cannot see (committed by another transaction while we
	 * waited) comes back with a NULL status and is re-read. */
	[PGQ_CLAIM] =
	"WITH t AS MATERIALIZED ("
	" SELECT t.k, t.f, t.m, t.p, t.s, t.ord FROM unnest($2::text[],"
	"  $3::text[], $4::text[], $7::bool[], $10::text[])"
	"  WITH ORDINALITY AS t(k, f, m, p, s, ord)),"
	" prior AS MATERIALIZED ("
	" SELECT t.k FROM t WHERE EXISTS (SELECT 1 FROM {T} y"
	"  WHERE y.consumer = $1 AND y.key = t.k AND y.gen > $8"
	"  AND y.gen < $9 OFFSET 0)"
	" OR (t.p AND EXISTS (SELECT 1 FROM {T} y"
	"  WHERE y.consumer = $1 AND y.key = t.k AND y.gen <= $8"
	"  OFFSET 0))),"
	" ins AS (" CLAIM_INSERT
	" FROM t WHERE NOT EXISTS (SELECT 1 FROM prior WHERE prior.k = t.k)"
	" ORDER BY t.ord"
	" ON CONFLICT DO NOTHING RETURNING x.key),"
	" old AS MATERIALIZED ("
	" SELECT t.k, t.ord FROM t"
	" WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.key = t.k))"
	CLAIM_ANSWER(" ORDER BY y.gen DESC"),

	/* PGQ_CLAIM when the client knows no sealed generation needs a
	 * look (same parameters; $7 and $8 unused): a key not inserted
	 * conflicted in the newest generation, $9 (a stale one is refused
	 * by its trigger, as above). */
	[PGQ_CLAIM_NEWEST] =
	"WITH ins AS (" CLAIM_INSERT
	" FROM unnest($2::text[], $3::text[], $4::text[], $10::text[])"
	"  AS t(k, f, m, s)"
	" ON CONFLICT DO NOTHING RETURNING x.key),"
	" old AS MATERIALIZED ("
	" SELECT t.k, t.ord FROM unnest($2::text[]) WITH ORDINALITY AS t(k, ord)"
	" WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.key = t.k))"
	CLAIM_ANSWER(" AND y.gen = $9"),

	[PGQ_CLAIM_REREAD] =
	"SELECT key, status, fingerprint, attempts, fence,"
	" coalesce(lease_until < now(), false), result, result_type, outcome"
	" FROM {T} WHERE consumer = $1 AND key = ANY($2::text[])",

	[PGQ_RECLAIM] =
	"UPDATE {T} SET status = $3, attempts = attempts + 1,"
	" fence = fence + 1,"
	" lease_until = CASE WHEN $3 = 'processing'"
	"  THEN now() + $4 * interval '1 millisecond' END,"
	" processed_at = CASE WHEN $3 = 'completed' THEN now() END,"
	" updated_at = now()"
	" WHERE consumer = $1 AND key = $2 AND (status = 'failed'"
	"  OR (status = 'processing' AND lease_until < now()))"
	" RETURNING attempts, fence",

	[PGQ_FINISH] =
	"UPDATE {T} SET status = $3,"
	" attempts = CASE WHEN $4 > 0 THEN $4 ELSE attempts END,"
	" lease_until = NULL,"
	" processed_at = CASE WHEN $3 IN ('completed', 'dead')"
	"  THEN now() END,"
	" updated_at = now()"
	" WHERE consumer = $1 AND key = $2 AND ($5 <= 0 OR fence = $5)"
	" AND ($6::text IS NULL OR status = $6)",

	[PGQ_EXTEND] =
	"UPDATE {T} SET lease_until = now() + $4 * interval '1 millisecond',"
	" updated_at = now()"
	" WHERE consumer = $1 AND key = $2 AND fence = $3"
	" AND status = 'processing'",

	/* One row per (consumer, dedup_key): a repeat is counted on the
	 * row there is, which is pending again. ON CONFLICT makes writers
	 * of the same dedup_key wait for each other, then the later one
	 * counts: never two rows (a NULL dedup_key never conflicts). */
	[PGQ_DEAD_LETTER] =
	"INSERT INTO {D} AS d (consumer, key, message_id, payload, headers,"
	" position, attempts, reason, fingerprint, stored_fingerprint,"
	" dedup_key, last_seen_at)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, now())"
	" ON CONFLICT (consumer, dedup_key) DO UPDATE"
	" SET deliveries = d.deliveries + 1,"
	" last_seen_at = greatest(d.last_seen_at, d.created_at, now()),"
	" attempts = excluded.attempts, reason = excluded.reason,"
	" replayed_at = NULL"
	" RETURNING id",

	[PGQ_REGISTER] =
	/* Never overwrites: a stored window is changed on purpose only
	 * (inbox_admin_set_retention); the core compares it. */
	"INSERT INTO {C} AS c (name, retention_seconds) VALUES ($1, $2)"
	" ON CONFLICT (name) DO NOTHING",

	[PGQ_RETENTION] = "SELECT retention_seconds FROM {C} WHERE name = $1",

	[PGQ_CONSUMERS] =
	"SELECT name, retention_seconds FROM {C} ORDER BY name",

	/* At most $3 rows, oldest first (the ORDER BY makes the plan a
	 * range scan of the (consumer, processed_at) index), each deleted
	 * by its primary key (ctid is not unique across the generations);
	 * the predicate is repeated so a row changed meanwhile is
	 * re-checked, not deleted. */
	[PGQ_PURGE_DELETE] =
	"DELETE FROM {T} d USING (SELECT consumer, key, gen FROM {T}"
	" WHERE consumer = $1 AND status IN ('completed', 'dead')"
	" AND processed_at < now() - $2 * interval '1 second'"
	" ORDER BY processed_at LIMIT $3) o"
	" WHERE d.consumer = o.consumer AND d.key = o.key AND d.gen = o.gen"
	" AND d.consumer = $1 AND d.status IN ('completed', 'dead')"
	" AND d.processed_at < now() - $2 * interval '1 second'",

	[PGQ_PURGE_COUNT] =
	"SELECT count(*) FROM {T} WHERE consumer = $1"
	" AND status IN ('completed', 'dead')"
	" AND processed_at < now() - $2 * interval '1 second'",

	[PGQ_VERSION] = "SELECT coalesce(max(version), 0) FROM {V}",

	[PGQ_OUTBOX_ADD] = inbox__pg_outbox_add_sql,
	[PGQ_OUTBOX_CLAIM] = inbox__pg_outbox_claim_sql,
	[PGQ_OUTBOX_FINISH] = inbox__pg_outbox_finish_sql,

	/* The outcomes and results of records' first processing (schema
	 * v5), the bytes as hex text, one record per element of the
	 * arrays: consumer, key, result, type, outcome. It travels as a
	 * handler statement, deferred with the batch's others, and a
	 * batch's are folded into one execution (pg_defer.c); should a
	 * record come twice, the later element is the one stored, as it
	 * would be one statement later. In the record's generation, sealed
	 * or not (the seal refuses inserts only). */
	[PGQ_SET_RESULT] =
	"UPDATE {T} AS y SET result = decode(r.h, 'hex'),"
	" result_type = r.t, outcome = r.o, updated_at = now()"
	" FROM (SELECT DISTINCT ON (u.c, u.k) u.c, u.k, u.h, u.t, u.o"
	"  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],"
	"  $5::text[]) WITH ORDINALITY AS u(c, k, h, t, o, n)"
	"  ORDER BY u.c, u.k, u.n DESC) r"
	" WHERE y.consumer = r.c AND y.key = r.k",
};
/* clang-format on */

static const Oid t_claim[] = {
    OID_TEXT, OID_TEXT_ARRAY, OID_TEXT_ARRAY, OID_TEXT_ARRAY, OID_TEXT,
    OID_INT8, OID_BOOL_ARRAY, OID_INT4,       OID_INT4,       OID_TEXT_ARRAY};
static const Oid t_reread[] = {OID_TEXT, OID_TEXT_ARRAY};
static const Oid t_reclaim[] = {OID_TEXT, OID_TEXT, OID_TEXT, OID_INT8};
static const Oid t_finish[] = {OID_TEXT, OID_TEXT, OID_TEXT,
                               OID_INT4, OID_INT8, OID_TEXT};
static const Oid t_extend[] = {OID_TEXT, OID_TEXT, OID_INT8, OID_INT8};
static const Oid t_dl[] = {OID_TEXT, OID_TEXT, OID_TEXT, OID_BYTEA,
                           OID_TEXT, OID_TEXT, OID_INT4, OID_TEXT,
                           OID_TEXT, OID_TEXT, OID_TEXT};
static const Oid t_register[] = {OID_TEXT, OID_INT8};
static const Oid t_text[] = {OID_TEXT};
static const Oid t_purge[] = {OID_TEXT, OID_INT8, OID_INT4};
static const Oid t_count[] = {OID_TEXT, OID_INT8};

/* No types: the outbox's SQL casts every parameter itself. */
const pg_qdef inbox__pg_qdefs[PGQ_COUNT] = {
    [PGQ_CLAIM] = {10, t_claim},        [PGQ_CLAIM_NEWEST] = {10, t_claim},
    [PGQ_CLAIM_REREAD] = {2, t_reread}, [PGQ_RECLAIM] = {4, t_reclaim},
    [PGQ_FINISH] = {6, t_finish},       [PGQ_EXTEND] = {4, t_extend},
    [PGQ_DEAD_LETTER] = {11, t_dl},     [PGQ_REGISTER] = {2, t_register},
    [PGQ_RETENTION] = {1, t_text},      [PGQ_CONSUMERS] = {0, NULL},
    [PGQ_PURGE_DELETE] = {3, t_purge},  [PGQ_PURGE_COUNT] = {2, t_count},
    [PGQ_VERSION] = {0, NULL},          [PGQ_OUTBOX_ADD] = {13, NULL},
    [PGQ_OUTBOX_CLAIM] = {3, NULL},     [PGQ_OUTBOX_FINISH] = {9, NULL},
    [PGQ_SET_RESULT] = {5, NULL},
};

/* clang-format off */
static const char schema_v1[] =
	"CREATE TABLE IF NOT EXISTS {T} ("
	" consumer text NOT NULL,"
	" key text NOT NULL,"
	" fingerprint text NOT NULL,"
	" status text NOT NULL,"
	" attempts int NOT NULL DEFAULT 1,"
	" fence bigint NOT NULL DEFAULT 1,"
	" lease_until timestamptz,"
	" message_id text,"
	" created_at timestamptz NOT NULL DEFAULT now(),"
	" processed_at timestamptz,"
	" updated_at timestamptz NOT NULL DEFAULT now(),"
	" PRIMARY KEY (consumer, key));\n"
	"CREATE INDEX IF NOT EXISTS \"{P}inbox_processed_idx\""
	" ON {T} (consumer, processed_at);\n"
	"CREATE TABLE IF NOT EXISTS {D} ("
	" id bigserial PRIMARY KEY,"
	" consumer text NOT NULL,"
	" key text,"
	" message_id text,"
	" payload bytea NOT NULL,"
	" headers text,"
	" position text,"
	" attempts int NOT NULL DEFAULT 0,"
	" reason text NOT NULL,"
	" fingerprint text,"
	" stored_fingerprint text,"
	" created_at timestamptz NOT NULL DEFAULT now(),"
	" replayed_at timestamptz);\n"
	"CREATE INDEX IF NOT EXISTS \"{P}dead_letters_consumer_idx\""
	" ON {D} (consumer, created_at);\n"
	"CREATE TABLE IF NOT EXISTS {C} ("
	" name text PRIMARY KEY,"
	" retention_seconds bigint NOT NULL,"
	" created_at timestamptz NOT NULL DEFAULT now(),"
	" updated_at timestamptz NOT NULL DEFAULT now());\n";
/* v4: dead letters are idempotent (pg_inbox.c). Only columns and an
 * index are added: existing rows keep their values (deliveries 1; a NULL
 * last_seen_at reads as created_at; a NULL dedup_key never conflicts). */
static const char schema_v4[] =
	"ALTER TABLE {D} ADD COLUMN IF NOT EXISTS dedup_key text,"
	" ADD COLUMN IF NOT EXISTS deliveries int NOT NULL DEFAULT 1,"
	" ADD COLUMN IF NOT EXISTS last_seen_at timestamptz;\n"
	"CREATE UNIQUE INDEX IF NOT EXISTS \"{P}dead_letters_dedup_idx\""
	" ON {D} (consumer, dedup_key);\n";
/* v5: stored results (pg_inbox.c). Columns only, on the partitioned
 * table: every generation, sealed ones too, gets them (NULL: no result
 * stored), and new generations (LIKE the table) have them. */
static const char schema_v5[] =
	"ALTER TABLE {T} ADD COLUMN IF NOT EXISTS result bytea,"
	" ADD COLUMN IF NOT EXISTS result_type text,"
	" ADD COLUMN IF NOT EXISTS outcome text;\n";
/* v6: the delivery's source position on the record (pg_inbox.c), so that
 * an operator's look-up by position finds it. A column only, on the
 * partitioned table like v5: every generation, sealed ones too, gets it
 * (NULL for the records there are, as for a delivery that gave none).
 * No index: a look-up scans the consumer's records, like one by message
 * id (docs/schema.md). */
static const char schema_v6[] =
	"ALTER TABLE {T} ADD COLUMN IF NOT EXISTS position text;\n";
/* clang-format on */

int inbox__pg_expand(const pg_store *s, const char *tmpl, inbox__buf *out)
{
	for (const char *p = tmpl; *p; p++) {
		const inbox__buf *name = NULL;
		if (p[0] == '{' && p[1] && p[2] == '}') {
			switch (p[1]) {
			case 'T':
				name = &s->t_inbox;
				break;
			case 'D':
				name = &s->t_dl;
				break;
			case 'C':
				name = &s->t_consumers;
				break;
			case 'V':
				name = &s->t_version;
				break;
			case 'O':
				name = &s->t_outbox;
				break;
			case 'G':
				name = &s->t_gens;
				break;
			case 'P':
				if (inbox__buf_puts(out, s->base.prefix) < 0)
					return -1;
				p += 2;
				continue;
			default:
				break;
			}
		}
		if (name) {
			if (inbox__buf_append(out, name->data, name->len) < 0)
				return -1;
			p += 2;
		} else if (inbox__buf_putc(out, *p) < 0) {
			return -1;
		}
	}
	return 0;
}

static int build_names(pg_store *s)
{
	struct {
		inbox__buf *b;
		const char *name;
	} t[] = {
	    {&s->t_inbox, "inbox"},         {&s->t_dl, "dead_letters"},
	    {&s->t_consumers, "consumers"}, {&s->t_version, "schema_version"},
	    {&s->t_outbox, "outbox"},       {&s->t_gens, "inbox_generations"}};
	for (size_t i = 0; i < sizeof(t) / sizeof(*t); i++) {
		inbox__buf_reset(t[i].b);
		if (inbox__table_name(t[i].b, &s->base, t[i].name) < 0)
			return -1;
	}
	return 0;
}

int inbox__pg_build_sql(pg_store *s)
{
	inbox__pg_free_sql(s);
	if (build_names(s) < 0)
		return -1;
	for (int q = 0; q < PGQ_COUNT; q++) {
		inbox__buf b = INBOX__BUF_INIT;
		if (inbox__pg_expand(s, templates[q], &b) < 0) {
			inbox__buf_free(&b);
			return -1;
		}
		s->sql[q] = b.data;
	}
	return 0;
}

void inbox__pg_free_sql(pg_store *s)
{
	for (int q = 0; q < PGQ_COUNT; q++) {
		free(s->sql[q]);
		s->sql[q] = NULL;
	}
	inbox__buf_free(&s->t_inbox);
	inbox__buf_free(&s->t_dl);
	inbox__buf_free(&s->t_consumers);
	inbox__buf_free(&s->t_version);
	inbox__buf_free(&s->t_outbox);
	inbox__buf_free(&s->t_gens);
}

static char *expanded(const pg_store *s, const char *tmpl)
{
	inbox__buf b = INBOX__BUF_INIT;
	if (inbox__pg_expand(s, tmpl, &b) < 0) {
		inbox__buf_free(&b);
		return NULL;
	}
	return b.data;
}

char *inbox__pg_schema_v1(const pg_store *s)
{
	return expanded(s, schema_v1);
}

char *inbox__pg_schema_v4(const pg_store *s)
{
	return expanded(s, schema_v4);
}

char *inbox__pg_schema_v5(const pg_store *s)
{
	return expanded(s, schema_v5);
}

char *inbox__pg_schema_v6(const pg_store *s)
{
	return expanded(s, schema_v6);
}

int64_t inbox__pg_lock_key(const inbox_store *st, const char *purpose)
{
	uint64_t h = INBOX__FNV_INIT;
	const char *parts[] = {
	    "libinbox:", purpose,
	    ":",         st->schema,
	    ".",         strcmp(purpose, "migrate") == 0 ? "" : st->prefix};
	for (size_t i = 0; i < sizeof(parts) / sizeof(*parts); i++)
		h = inbox__fnv1a(h, parts[i], strlen(parts[i]));
	return (int64_t)h;
}
