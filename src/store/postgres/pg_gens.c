/*
 * Generations of the PostgreSQL inbox.
 *
 * With random keys (UUIDv4), a single primary key over all of an inbox's
 * records stops fitting in shared buffers as the inbox grows: every new
 * key then reads a random leaf from outside them, dirties it, and logs it
 * whole after each checkpoint, and a claim of 100 keys costs several
 * times what it costs on a small inbox (bench/README.md, section 4). A
 * read-only lookup costs about as much as the write, so partitioning
 * alone does not help; what does is not touching the big index at all
 * for a key that is not there.
 *
 * So the inbox is a LIST-partitioned table, one partition per
 * generation, listed in {G} (inbox_generations). New keys go to the
 * newest generation, which stays small. inbox_store_seal() (called by
 * `inbox purge`) seals the newest generation once it holds enough rows
 * and opens the next: in one transaction it attaches the new partition,
 * creates on the old one a trigger that refuses every insert
 * (serialization_failure: the claim's batch is re-run), and records the
 * new generation. Creating the trigger waits for every transaction that
 * wrote into the old partition and holds back new ones until the commit;
 * a claim that read the old generation number and comes after finds the
 * trigger and is re-run. So once the seal commits, the old generation's
 * keys are all committed and no key can join them. Then the seal builds
 * a Bloom filter of those keys (12 bits and 8 hashes per key: about 0.3%
 * false positives) and stores it in {G}.
 *
 * Each store handle loads the filters (refreshing the list every two
 * seconds) and tells the claim, per key, whether a filter may hold it:
 * only those keys are looked up in the sealed generations that have a
 * filter; every sealed generation newer than the loaded filters is
 * looked up for every key. A filter never misses a key it was built
 * from, and a stale handle only looks up more, so a key recorded in any
 * generation is always found.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres/pg_store.h"

#define BLOOM_BITS_PER_KEY 12
#define BLOOM_HASHES       8
#define REFRESH_S          2.0
#define FETCH_ROWS         "20000"

typedef struct pg_bloom {
	int gen;
	int k;
	uint64_t nbits;
	unsigned char *bits;
} pg_bloom;

/* ---- hashing -------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* The two hashes of double hashing (bit i = h0 + i * h1), both mixed
 * from one FNV-1a 64 of consumer NUL key; h1 odd. The filter is stored,
 * so this function is part of the format. */
static void key_hash(const char *consumer, const char *key, uint64_t h[2])
{
	uint64_t a =
	    inbox__fnv1a(INBOX__FNV_INIT, consumer, strlen(consumer) + 1);
	a = inbox__fnv1a(a, key, strlen(key));
	h[0] = mix64(a);
	h[1] = mix64(a ^ 0x9e3779b97f4a7c15ull) | 1;
}

/* Bit i of a key's k bits in a filter of nbits. */
static uint64_t bit_of(const uint64_t h[2], int i, uint64_t nbits)
{
	return (h[0] + (uint64_t)i * h[1]) % nbits;
}

static void bloom_add(unsigned char *bits, uint64_t nbits, int k,
                      const uint64_t h[2])
{
	for (int i = 0; i < k; i++) {
		uint64_t b = bit_of(h, i, nbits);
		bits[b >> 3] |= (unsigned char)(1u << (b & 7));
	}
}

static int bloom_has(const pg_bloom *f, const uint64_t h[2])
{
	for (int i = 0; i < f->k; i++) {
		uint64_t b = bit_of(h, i, f->nbits);
		if (!(f->bits[b >> 3] & (1u << (b & 7))))
			return 0;
	}
	return 1;
}

/* ---- names ---------------------------------------------------------- */

/* The qualified, quoted name of generation g's partition. */
static int part_name(pg_store *s, inbox__buf *b, int g)
{
	char name[32];
	snprintf(name, sizeof(name), "inbox_g%d", g);
	return inbox__table_name(b, &s->base, name);
}

static int cmd(pg_store *s, const char *sql, const char *what)
{
	return inbox__pg_simple(s, sql, NULL, NULL, what);
}

/* ---- schema v3 ------------------------------------------------------ */

int inbox__pg_gens_migrate(pg_store *s)
{
	const char *T = s->t_inbox.data, *P = s->base.prefix;
	inbox__buf q = INBOX__BUF_INIT, g1 = INBOX__BUF_INIT,
	           b1 = INBOX__BUF_INIT, idx = INBOX__BUF_INIT,
	           idx1 = INBOX__BUF_INIT, fn = INBOX__BUF_INIT,
	           drop = INBOX__BUF_INIT;
	char bare[96], bare_idx[112];
	PGresult *r = NULL;
	int rc = INBOX_ERR_NOMEM;
	/* Already in generations (a version row lost)? And the name the
	 * server gave the v1 primary key (consumer, key), which gives way
	 * to (consumer, key, gen). T is quoted; identifiers we build never
	 * hold a single quote (validated prefix and schema). */
	if (inbox__buf_printf(&q,
	                      "SELECT c.relkind = 'p', (SELECT conname FROM"
	                      " pg_constraint WHERE conrelid = c.oid AND"
	                      " contype = 'p') FROM pg_class c"
	                      " WHERE c.oid = '%s'::regclass",
	                      T) < 0)
		goto out;
	r = PQexec(s->conn, q.data);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		rc = inbox__pg_fail(s, r, "migrate");
		goto out;
	}
	if (PQgetvalue(r, 0, 0)[0] == 't') {
		rc = INBOX_OK;
		goto out;
	}
	snprintf(bare, sizeof(bare), "%sinbox_g1", P);
	snprintf(bare_idx, sizeof(bare_idx), "%sinbox_g1_processed_idx", P);
	if (part_name(s, &g1, 1) < 0 || inbox__quote_ident(&b1, bare) < 0 ||
	    inbox__quote_ident(&idx1, bare_idx) < 0 ||
	    inbox__table_name(&idx, &s->base, "inbox_processed_idx") < 0 ||
	    inbox__table_name(&fn, &s->base, "inbox_sealed") < 0)
		goto out;
	if (!PQgetisnull(r, 0, 1) &&
	    (inbox__buf_printf(&drop, "ALTER TABLE %s DROP CONSTRAINT ",
	                       g1.data) < 0 ||
	     inbox__quote_ident(&drop, PQgetvalue(r, 0, 1)) < 0 ||
	     inbox__buf_puts(&drop, ";\n") < 0))
		goto out;
	/* The old table becomes generation 1 of the new, partitioned one. */
	inbox__buf_reset(&q);
	if (inbox__buf_printf(
	        &q,
	        "ALTER TABLE %s RENAME TO %s;\n"
	        "%s"
	        "ALTER INDEX %s RENAME TO %s;\n"
	        "ALTER TABLE %s ADD COLUMN gen int NOT NULL DEFAULT 1;\n"
	        "ALTER TABLE %s ALTER COLUMN gen DROP DEFAULT;\n"
	        "ALTER TABLE %s ADD CHECK (gen = 1);\n"
	        "CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS,"
	        " PRIMARY KEY (consumer, key, gen)) PARTITION BY LIST (gen);\n"
	        "CREATE INDEX \"%sinbox_processed_idx\""
	        " ON %s (consumer, processed_at);\n"
	        "ALTER TABLE %s ATTACH PARTITION %s FOR VALUES IN (1);\n"
	        "CREATE TABLE IF NOT EXISTS %s (gen int PRIMARY KEY,"
	        " created_at timestamptz NOT NULL DEFAULT now(),"
	        " sealed_at timestamptz, nkeys bigint, bloom bytea,"
	        " bloom_hashes int);\n"
	        "INSERT INTO %s (gen) VALUES (1) ON CONFLICT DO NOTHING;\n"
	        "CREATE OR REPLACE FUNCTION %s() RETURNS trigger"
	        " LANGUAGE plpgsql AS $f$ BEGIN RAISE EXCEPTION"
	        " 'inbox generation %% is sealed: retry', NEW.gen"
	        " USING ERRCODE = 'serialization_failure'; END $f$;\n",
	        T, b1.data, drop.len ? drop.data : "", idx.data, idx1.data,
	        g1.data, g1.data, g1.data, T, g1.data, P, T, T, g1.data,
	        s->t_gens.data, s->t_gens.data, fn.data) < 0)
		goto out;
	rc = cmd(s, q.data, "migrate");
out:
	PQclear(r);
	inbox__buf_free(&q);
	inbox__buf_free(&g1);
	inbox__buf_free(&b1);
	inbox__buf_free(&idx);
	inbox__buf_free(&idx1);
	inbox__buf_free(&fn);
	inbox__buf_free(&drop);
	if (rc == INBOX_ERR_NOMEM)
		inbox__store_seterr(&s->base, "", "migrate: out of memory");
	return rc;
}

/* ---- filters in the handle ------------------------------------------ */

static void bloom_drop(pg_store *s, int i)
{
	free(s->blooms[i].bits);
	s->blooms[i] = s->blooms[--s->nblooms];
}

void inbox__pg_gens_free(pg_store *s)
{
	while (s->nblooms > 0)
		bloom_drop(s, s->nblooms - 1);
	free(s->blooms);
	s->blooms = NULL;
	inbox__buf_free(&s->maybe);
}

static pg_bloom *bloom_of(pg_store *s, int gen)
{
	for (int i = 0; i < s->nblooms; i++)
		if (s->blooms[i].gen == gen)
			return &s->blooms[i];
	return NULL;
}

/* Fetch generation g's filter (k hashes, len bytes) into the handle, a
 * megabyte at a time: as text, a whole 12 MB filter would cost three
 * times its size in buffers at once. */
#define LOAD_CHUNK (1 << 20)
static int bloom_load(pg_store *s, int g, int k, int64_t len)
{
	if (len <= 0 || k < 1)
		return INBOX_OK; /* nothing usable: the generation is looked up
		                  */
	pg_bloom *nb =
	    realloc(s->blooms, (size_t)(s->nblooms + 1) * sizeof(*nb));
	if (!nb)
		return INBOX_ERR_NOMEM;
	s->blooms = nb;
	unsigned char *bits = malloc((size_t)len);
	inbox__buf q = INBOX__BUF_INIT;
	if (!bits ||
	    inbox__buf_printf(&q,
	                      "SELECT substring(bloom FROM $2::int FOR %d)"
	                      " FROM %s WHERE gen = $1::int",
	                      LOAD_CHUNK, s->t_gens.data) < 0) {
		free(bits);
		return INBOX_ERR_NOMEM;
	}
	int rc = INBOX_OK;
	for (int64_t off = 0; off < len && rc == INBOX_OK;) {
		char gs[16], os[24];
		snprintf(gs, sizeof(gs), "%d", g);
		snprintf(os, sizeof(os), "%lld", (long long)off + 1);
		const char *params[2] = {gs, os};
		PGresult *r = inbox__pg_run(s, -1, q.data, 2, params, NULL,
		                            NULL, "claim", &rc);
		if (!r)
			break;
		size_t n = 0;
		unsigned char *part = NULL;
		if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
			part = PQunescapeBytea(
			    (const unsigned char *)PQgetvalue(r, 0, 0), &n);
		PQclear(r);
		if (!part || n == 0 || (int64_t)n > len - off) {
			/* gone or changed meanwhile: look the generation up */
			PQfreemem(part);
			free(bits);
			inbox__buf_free(&q);
			return INBOX_OK;
		}
		memcpy(bits + off, part, n);
		PQfreemem(part);
		off += (int64_t)n;
	}
	inbox__buf_free(&q);
	if (rc != INBOX_OK) {
		free(bits);
		return rc;
	}
	s->blooms[s->nblooms++] = (pg_bloom){
	    .gen = g, .k = k, .nbits = (uint64_t)len * 8, .bits = bits};
	return INBOX_OK;
}

/* Re-read the list of sealed generations: load new filters, forget those
 * of generations gone, and set bloom_upto. In the claim's transaction. */
static int refresh(pg_store *s)
{
	inbox__buf q = INBOX__BUF_INIT;
	if (inbox__buf_printf(&q,
	                      "SELECT gen, bloom IS NOT NULL, bloom_hashes,"
	                      " sealed_at IS NOT NULL, octet_length(bloom)"
	                      " FROM %s ORDER BY gen",
	                      s->t_gens.data) < 0)
		return INBOX_ERR_NOMEM;
	int rc;
	PGresult *r =
	    inbox__pg_run(s, -1, q.data, 0, NULL, NULL, NULL, "claim", &rc);
	inbox__buf_free(&q);
	if (!r)
		return rc;
	int rows = PQntuples(r);
	for (int i = 0; i < s->nblooms;) {
		int found = 0;
		for (int j = 0; j < rows && !found; j++)
			found = (int)inbox__pg_int(r, j, 0) == s->blooms[i].gen;
		if (found)
			i++;
		else
			bloom_drop(s, i);
	}
	int upto = 0, gap = 0, cur = 1;
	rc = INBOX_OK;
	for (int j = 0; j < rows && rc == INBOX_OK; j++) {
		int g = (int)inbox__pg_int(r, j, 0);
		int has = PQgetvalue(r, j, 1)[0] == 't';
		if (PQgetvalue(r, j, 3)[0] != 't') {
			cur = g; /* the newest: last, unsealed */
			continue;
		}
		if (has && !bloom_of(s, g))
			rc = bloom_load(s, g, (int)inbox__pg_int(r, j, 2),
			                inbox__pg_int(r, j, 4));
		if (!gap && bloom_of(s, g))
			upto = g;
		else
			gap = 1;
	}
	PQclear(r);
	s->bloom_upto = upto;
	s->gen_cur = cur;
	return rc;
}

int inbox__pg_gens_maybe(pg_store *s, const char *consumer,
                         const inbox_claim *claims, size_t n, char upto[16],
                         char cur[16], int *lookup)
{
	double now = inbox__mono_seconds();
	if (s->gens_checked == 0 || now - s->gens_checked >= REFRESH_S) {
		int rc = refresh(s);
		if (rc != INBOX_OK)
			return rc;
		s->gens_checked = now > 0 ? now : 1e-9;
	}
	snprintf(upto, 16, "%d", s->bloom_upto);
	snprintf(cur, 16, "%d", s->gen_cur);
	/* Sealed generations without a filter: every key is looked up. */
	*lookup = s->bloom_upto + 1 < s->gen_cur;
	if (s->gen_cur <= 1)
		return INBOX_OK; /* nothing sealed: the plain claim */
	inbox__buf *b = &s->maybe;
	int bad = inbox__pg_barr_start(b, PG_OID_BOOL);
	for (size_t i = 0; i < n && !bad; i++) {
		int p = 0;
		if (s->bloom_upto > 0) {
			uint64_t h[2];
			key_hash(consumer, claims[i].key, h);
			for (int f = 0; f < s->nblooms && !p; f++)
				p = s->blooms[f].gen <= s->bloom_upto &&
				    bloom_has(&s->blooms[f], h);
		}
		bad = inbox__pg_barr_bool(b, p);
		*lookup |= p;
	}
	if (bad)
		return INBOX_ERR_NOMEM;
	return INBOX_OK;
}

/* ---- sealing -------------------------------------------------------- */

/* One value of a one-row statement. */
static int scalar(pg_store *s, const char *sql, int64_t *out)
{
	PGresult *r = PQexec(s->conn, sql);
	int rc = INBOX_OK;
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
		rc = inbox__pg_fail(s, r, "seal");
	else
		*out = PQgetisnull(r, 0, 0) ? 0 : inbox__pg_int(r, 0, 0);
	PQclear(r);
	return rc;
}

/* Build and store the filter of sealed generation g. */
static int build_filter(pg_store *s, int g)
{
	inbox__buf part = INBOX__BUF_INIT, q = INBOX__BUF_INIT;
	unsigned char *bits = NULL;
	int64_t count = 0;
	int rc = INBOX_ERR_NOMEM;
	if (part_name(s, &part, g) < 0)
		goto out;
	if ((rc = cmd(s, "BEGIN ISOLATION LEVEL REPEATABLE READ", "seal")))
		goto out;
	rc = INBOX_ERR_NOMEM;
	if (inbox__buf_printf(&q, "SELECT count(*) FROM ONLY %s", part.data) <
	    0)
		goto rollback;
	if ((rc = scalar(s, q.data, &count)))
		goto rollback;
	uint64_t nbits = (uint64_t)count * BLOOM_BITS_PER_KEY;
	nbits = nbits < 1024 ? 1024 : (nbits + 63) / 64 * 64;
	rc = INBOX_ERR_NOMEM;
	bits = calloc(nbits / 8, 1);
	inbox__buf_reset(&q);
	if (!bits || inbox__buf_printf(&q,
	                               "DECLARE inbox_seal NO SCROLL CURSOR FOR"
	                               " SELECT consumer, key FROM ONLY %s",
	                               part.data) < 0)
		goto rollback;
	if ((rc = cmd(s, q.data, "seal")))
		goto rollback;
	for (;;) {
		PGresult *r =
		    PQexec(s->conn, "FETCH " FETCH_ROWS " FROM inbox_seal");
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			rc = inbox__pg_fail(s, r, "seal");
			PQclear(r);
			goto rollback;
		}
		int rows = PQntuples(r);
		for (int i = 0; i < rows; i++) {
			uint64_t h[2];
			key_hash(PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), h);
			bloom_add(bits, nbits, BLOOM_HASHES, h);
		}
		PQclear(r);
		if (rows == 0)
			break;
	}
	if ((rc = cmd(s, "COMMIT", "seal")))
		goto out;
	char gs[16], ks[16], ns[24];
	snprintf(gs, sizeof(gs), "%d", g);
	snprintf(ks, sizeof(ks), "%d", BLOOM_HASHES);
	snprintf(ns, sizeof(ns), "%lld", (long long)count);
	const char *vals[4] = {(const char *)bits, ks, ns, gs};
	int lens[4] = {(int)(nbits / 8), 0, 0, 0};
	int fmts[4] = {1, 0, 0, 0};
	inbox__buf_reset(&q);
	rc = INBOX_ERR_NOMEM;
	if (inbox__buf_printf(&q,
	                      "UPDATE %s SET bloom = $1::bytea,"
	                      " bloom_hashes = $2::int, nkeys = $3::bigint"
	                      " WHERE gen = $4::int AND bloom IS NULL",
	                      s->t_gens.data) < 0)
		goto out;
	PGresult *r =
	    PQexecParams(s->conn, q.data, 4, NULL, vals, lens, fmts, 0);
	rc = PQresultStatus(r) == PGRES_COMMAND_OK
	         ? INBOX_OK
	         : inbox__pg_fail(s, r, "seal");
	PQclear(r);
	goto out;
rollback:
	PQclear(PQexec(s->conn, "ROLLBACK"));
out:
	free(bits);
	inbox__buf_free(&part);
	inbox__buf_free(&q);
	if (rc == INBOX_ERR_NOMEM)
		inbox__store_seterr(&s->base, "", "seal: out of memory");
	return rc;
}

/* Call fn for each generation of {G} matching `where`, in order, until
 * one fails. */
static int each_gen(pg_store *s, const char *where, int (*fn)(pg_store *, int))
{
	inbox__buf q = INBOX__BUF_INIT;
	if (inbox__buf_printf(&q, "SELECT gen FROM %s WHERE %s ORDER BY gen",
	                      s->t_gens.data, where) < 0)
		return INBOX_ERR_NOMEM;
	PGresult *r = PQexec(s->conn, q.data);
	inbox__buf_free(&q);
	int rc = PQresultStatus(r) == PGRES_TUPLES_OK
	             ? INBOX_OK
	             : inbox__pg_fail(s, r, "seal");
	for (int i = 0; rc == INBOX_OK && i < PQntuples(r); i++)
		rc = fn(s, (int)inbox__pg_int(r, i, 0));
	PQclear(r);
	return rc;
}

/* Sealed generation g, if the purge left it empty: detach it
 * (concurrently: claims are not held back) and drop it, so its filter
 * stops answering "maybe". No row can come back into it. */
static int drop_if_empty(pg_store *s, int g)
{
	inbox__buf part = INBOX__BUF_INIT, q = INBOX__BUF_INIT;
	int64_t any = 1;
	int rc = INBOX_ERR_NOMEM;
	if (part_name(s, &part, g) < 0 ||
	    inbox__buf_printf(&q,
	                      "SELECT count(*) FROM (SELECT 1 FROM ONLY %s"
	                      " LIMIT 1) x",
	                      part.data) < 0)
		goto out;
	rc = scalar(s, q.data, &any);
	if (rc != INBOX_OK || any != 0)
		goto out;
	inbox__buf_reset(&q);
	rc = INBOX_ERR_NOMEM;
	if (inbox__buf_printf(&q,
	                      "ALTER TABLE %s DETACH PARTITION %s CONCURRENTLY",
	                      s->t_inbox.data, part.data) < 0)
		goto out;
	rc = cmd(s, q.data, "seal");
	inbox__buf_reset(&q);
	if (rc == INBOX_OK) {
		rc = INBOX_ERR_NOMEM;
		if (inbox__buf_printf(
		        &q, "DROP TABLE %s; DELETE FROM %s WHERE gen = %d",
		        part.data, s->t_gens.data, g) == 0)
			rc = cmd(s, q.data, "seal");
	}
out:
	inbox__buf_free(&part);
	inbox__buf_free(&q);
	return rc;
}

/* In the open seal transaction: seal generation g, open g + 1. */
static int rotate(pg_store *s, int g)
{
	inbox__buf old = INBOX__BUF_INIT, nw = INBOX__BUF_INIT,
	           fn = INBOX__BUF_INIT, ddl = INBOX__BUF_INIT;
	int rc = INBOX_ERR_NOMEM;
	if (part_name(s, &old, g) < 0 || part_name(s, &nw, g + 1) < 0 ||
	    inbox__table_name(&fn, &s->base, "inbox_sealed") < 0 ||
	    inbox__buf_printf(
	        &ddl,
	        "CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS, CHECK (gen = "
	        "%d));\n"
	        "ALTER TABLE %s ATTACH PARTITION %s FOR VALUES IN (%d);\n"
	        "CREATE TRIGGER \"inbox_sealed\" BEFORE INSERT ON %s"
	        " FOR EACH ROW EXECUTE FUNCTION %s();\n"
	        "UPDATE %s SET sealed_at = now() WHERE gen = %d;\n"
	        "INSERT INTO %s (gen) VALUES (%d);\n",
	        nw.data, s->t_inbox.data, g + 1, s->t_inbox.data, nw.data,
	        g + 1, old.data, fn.data, s->t_gens.data, g, s->t_gens.data,
	        g + 1) < 0)
		goto out;
	rc = cmd(s, ddl.data, "seal");
out:
	inbox__buf_free(&old);
	inbox__buf_free(&nw);
	inbox__buf_free(&fn);
	inbox__buf_free(&ddl);
	return rc;
}

int inbox__pg_seal(inbox_store *st, int64_t min_rows, int *sealed)
{
	pg_store *s = (pg_store *)st;
	*sealed = 0;
	if (st->in_txn) {
		inbox__store_seterr(st, "", "seal: a transaction is open");
		return INBOX_ERR_STATE;
	}
	inbox__pg_ensure_connected(s);
	char sql[160];
	int64_t g = 0, rows = 0;
	/* The trigger waits for the old generation's writers and holds new
	 * ones back until the commit: never for long (a forgotten open
	 * transaction would stall every consumer). */
	int rc = cmd(s, "BEGIN", "seal");
	if (rc == INBOX_OK)
		rc = cmd(s, "SET LOCAL lock_timeout = '2s'", "seal");
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_xact_lock(%lld)",
	         (long long)inbox__pg_lock_key(st, "seal"));
	if (rc == INBOX_OK)
		rc = cmd(s, sql, "seal");
	inbox__buf q = INBOX__BUF_INIT;
	if (rc == INBOX_OK && inbox__buf_printf(&q, "SELECT max(gen) FROM %s",
	                                        s->t_gens.data) < 0)
		rc = INBOX_ERR_NOMEM;
	if (rc == INBOX_OK)
		rc = scalar(s, q.data, &g);
	inbox__buf_reset(&q);
	/* An empty generation is never sealed. */
	if (min_rows < 1)
		min_rows = 1;
	if (rc == INBOX_OK) {
		inbox__buf part = INBOX__BUF_INIT;
		if (part_name(s, &part, (int)g) < 0 ||
		    inbox__buf_printf(&q,
		                      "SELECT count(*) FROM (SELECT 1 FROM ONLY"
		                      " %s LIMIT %lld) x",
		                      part.data, (long long)min_rows) < 0)
			rc = INBOX_ERR_NOMEM;
		inbox__buf_free(&part);
		if (rc == INBOX_OK)
			rc = scalar(s, q.data, &rows);
	}
	inbox__buf_free(&q);
	int due = rc == INBOX_OK && g >= 1 && rows >= min_rows;
	if (due)
		rc = rotate(s, (int)g);
	if (rc == INBOX_OK)
		rc = cmd(s, "COMMIT", "seal");
	else
		PQclear(PQexec(s->conn, "ROLLBACK"));
	if (rc != INBOX_OK)
		return rc;
	if (due)
		*sealed = (int)g;
	s->gens_checked = 0;
	/* Filters the sealed generations lack (a seal interrupted between
	 * its commit and its filter, or another process's); then the sealed
	 * generations purges emptied — only those sealed over a minute ago:
	 * a handle may take a generation for the newest for two seconds after
	 * its seal (then be refused by the trigger, and re-read); it must not
	 * find it gone. A failure leaves the rest for the next seal. */
	rc = each_gen(s, "sealed_at IS NOT NULL AND bloom IS NULL",
	              build_filter);
	if (rc == INBOX_OK)
		rc = each_gen(s, "sealed_at < now() - interval '1 minute'",
		              drop_if_empty);
	return rc;
}
