/*
 * Store conformance: cases at the vtable, included by conformance.c (its
 * helpers and env). Each case calls a store's slots directly, the way the
 * core does, so that every store is held to the same contract — the
 * cases test_sqlite_store and test_pg_store used to write twice.
 */

/* A stored window the core asks of its store: the vtable answers it */
static int64_t fake_window;
static int fake_stored_retention(inbox_store *st, const char *consumer,
                                 int64_t *seconds)
{
	(void)st;
	(void)consumer;
	*seconds = fake_window;
	return INBOX_OK;
}

/* stored_retention (vtable version 7): the window register_consumer
 * stored, or set_retention set since; the longest for NULL; 0 for none.
 * The core's checks go through it (a consumer opened with another
 * window, a purge below it), and a version-7 vtable without it does not
 * register. */
TEST(slot_stored_retention)
{
	env e;
	ASSERT_OK(env_setup(&e));
	inbox_store *st = e.st;
	const inbox_store_vtable *vt = st->vt;
	ASSERT_TRUE(vt->version >= 7 && vt->stored_retention != NULL);
	int64_t w = -1;
	ASSERT_OK(vt->stored_retention(st, "sr.none", &w));
	ASSERT_EQ(w, 0);
	ASSERT_OK(vt->stored_retention(st, NULL, &w));
	ASSERT_EQ(w, 0);
	ASSERT_OK(vt->register_consumer(st, "sr.a", 3600));
	ASSERT_OK(vt->register_consumer(st, "sr.b", 7200));
	ASSERT_OK(vt->register_consumer(st, "sr.a", 60)); /* kept as it was */
	ASSERT_OK(vt->stored_retention(st, "sr.a", &w));
	ASSERT_EQ(w, 3600);
	ASSERT_OK(vt->stored_retention(st, "sr.b", &w));
	ASSERT_EQ(w, 7200);
	ASSERT_OK(vt->stored_retention(st, NULL, &w));
	ASSERT_EQ(w, 7200);
	ASSERT_OK(vt->stored_retention(st, "sr.none", &w));
	ASSERT_EQ(w, 0);
	/* a consumer name is a parameter, never SQL */
	ASSERT_OK(vt->stored_retention(st, "x' OR '1'='1", &w));
	ASSERT_EQ(w, 0);
	int64_t was = 0;
	ASSERT_OK(inbox_admin_set_retention(st, "sr.a", 90, &was));
	ASSERT_EQ(was, 3600);
	ASSERT_OK(vt->stored_retention(st, "sr.a", &w));
	ASSERT_EQ(w, 90);
	/* inside a transaction too */
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(vt->stored_retention(st, "sr.b", &w));
	ASSERT_EQ(w, 7200);
	ASSERT_OK(vt->rollback(st));

	/* The core asks the slot, not the table: a backend answering
	 * another window is believed (consumer open, purge, stats). */
	static inbox_store_vtable fake;
	fake = *vt;
	fake.stored_retention = fake_stored_retention;
	fake_window = 4242;
	st->vt = &fake;
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "sr.a";
	o.retention_seconds = 90; /* the table's */
	char err[512] = "";
	inbox_consumer *c = NULL;
	ASSERT_EQ(inbox_consumer_open(&c, st, &o, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(err, "differs from the 4242s stored");
	int64_t deleted = -1;
	ASSERT_EQ(inbox_store_purge(st, "sr.a", 4000, 10, 0, &deleted),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_store_errmsg(st), "shorter than the 4242s");
	inbox_admin_stats as = INBOX_ADMIN_STATS_INIT;
	ASSERT_OK(inbox_admin_stats_read(st, "sr.a", &as));
	ASSERT_EQ(as.retention_seconds, 4242);
	ASSERT_OK(inbox_admin_set_retention(st, "sr.a", 90, &was));
	ASSERT_EQ(was, 4242);
	st->vt = vt;

	/* registration: version 7 claims the slot */
	static inbox_store_vtable v7;
	v7 = *vt;
	v7.scheme = is_pg ? "conf-pg-v7" : "conf-sq-v7";
	v7.alias = NULL;
	v7.open = dummy_open;
	v7.stored_retention = NULL;
	ASSERT_EQ(inbox_store_register(&v7), INBOX_ERR_INVALID);
	env_teardown(&e);
}

#define SL_FPA                                                                 \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SL_FPB                                                                 \
	"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static void sl_claims(inbox_claim *c, size_t n, const char *const *keys,
                      const char *fp)
{
	memset(c, 0, n * sizeof(*c));
	for (size_t i = 0; i < n; i++) {
		c[i].key = keys[i];
		c[i].fingerprint = fp;
	}
}

/* claim: new keys, then duplicates with their stored fingerprint, the
 * same key twice in one call (the second sees the first), another
 * consumer's keys of its own, keys stored as given (quotes, backslash,
 * braces), message id or NULL. (Was claim_new_and_duplicate of
 * test_sqlite_store, claim_new_then_duplicate and
 * claim_repeated_key_in_input of test_pg_store.) */
TEST(slot_claim_new_and_duplicate)
{
	env e;
	ASSERT_OK(env_setup(&e));
	inbox_store *st = e.st;
	const inbox_store_vtable *vt = st->vt;
	const char *keys[] = {"k1", "k2", "k2", "k\"3\\,{}'"};
	inbox_claim c[4];
	sl_claims(c, 4, keys, SL_FPA);
	c[2].fingerprint = SL_FPB;
	c[1].message_id = "id-2";
	ASSERT_OK(vt->begin(st));
	ASSERT_EQ(st->in_txn, 1);
	ASSERT_OK(vt->claim(st, "cons", c, 4, INBOX_ST_COMPLETED, 0));
	for (int i = 0; i < 4; i++) {
		if (i == 2)
			continue;
		ASSERT_EQ(c[i].is_new, 1);
		ASSERT_EQ(c[i].attempts, 0);
		ASSERT_EQ(c[i].fence, 1);
	}
	/* the same key twice in one call: the second sees the first */
	ASSERT_EQ(c[2].is_new, 0);
	ASSERT_EQ(c[2].status, INBOX_ST_COMPLETED);
	ASSERT_STREQ(c[2].stored_fingerprint, SL_FPA);
	ASSERT_OK(vt->commit(st));
	ASSERT_EQ(st->in_txn, 0);

	sl_claims(c, 4, keys, SL_FPB);
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(vt->claim(st, "cons", c, 4, INBOX_ST_COMPLETED, 0));
	ASSERT_OK(vt->commit(st));
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(c[i].is_new, 0);
		ASSERT_EQ(c[i].status, INBOX_ST_COMPLETED);
		ASSERT_STREQ(c[i].stored_fingerprint, SL_FPA); /* conflicts */
		ASSERT_EQ(c[i].attempts, 1);
		ASSERT_EQ(c[i].fence, 1);
		ASSERT_EQ(c[i].lease_expired, 0);
	}
	/* another consumer has its own keys; rolled back, it leaves none */
	sl_claims(c, 1, keys, SL_FPB);
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(vt->claim(st, "other", c, 1, INBOX_ST_COMPLETED, 0));
	ASSERT_EQ(c[0].is_new, 1);
	ASSERT_OK(vt->rollback(st));
	ASSERT_EQ(st->in_txn, 0);
	/* stored as given: the key, the message id (or NULL), completed
	 * with processed_at and no lease */
	ASSERT_EQ(count(st, e.inbox_tbl,
	                "consumer = 'cons' AND key = 'k\"3\\,{}''' AND "
	                "message_id IS NULL"),
	          1);
	ASSERT_EQ(count(st, e.inbox_tbl,
	                "consumer = 'cons' AND key = 'k2' AND message_id = "
	                "'id-2' AND processed_at IS NOT NULL AND lease_until "
	                "IS NULL AND status = 'completed'"),
	          1);
	ASSERT_EQ(count(st, e.inbox_tbl, NULL), 3);
	ASSERT_EQ(count(st, e.inbox_tbl, "consumer = 'other'"), 0);
	env_teardown(&e);
}

/* savepoint / release / rollback_to: a failed statement rolled back to
 * its savepoint, empty savepoints, a savepoint that releases the one
 * before, release with none, rollback_to twice, many in a row; commit
 * keeps what was released, rollback drops everything. (Was savepoints of
 * test_sqlite_store and of test_pg_store; PostgreSQL's native-handle
 * check stays there.) */
TEST(slot_savepoints)
{
	env e;
	ASSERT_OK(env_setup(&e));
	inbox_store *st = e.st;
	const inbox_store_vtable *vt = st->vt;
	char t[96], ins[160];
	snprintf(t, sizeof(t), "\"%ssp\"", e.prefix);
	ASSERT_OK(sql(st, "CREATE TABLE %s (k TEXT PRIMARY KEY)", t));
	snprintf(ins, sizeof(ins), "INSERT INTO %s VALUES ($1)", t);
	const char *a[1] = {"a"}, *b[1] = {"b"}, *c[1] = {"c"}, *d[1] = {"d"},
	           *f[1] = {"f"}, *g[1] = {"g"};
	int64_t rows = -1;
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(vt->savepoint(st));
	ASSERT_OK(vt->exec(st, ins, 1, a, &rows));
	ASSERT_EQ(rows, 1);
	ASSERT_OK(vt->release(st));
	ASSERT_OK(vt->savepoint(st));
	ASSERT_OK(vt->exec(st, ins, 1, b, &rows));
	/* a failed statement: the savepoint takes it back, b with it */
	ASSERT_EQ(vt->exec(st, ins, 1, a, &rows), INBOX_ERR_STORE);
	ASSERT_OK(vt->rollback_to(st));
	ASSERT_OK(vt->release(st));
	/* A release with no savepoint is a no-op on SQLite; on PostgreSQL
	 * it aborts the transaction (the sys/store.h contract does not say:
	 * the core never does it). Kept as SQLite's own, as it was. */
	if (!is_pg)
		ASSERT_OK(vt->release(st));
	ASSERT_OK(vt->savepoint(st)); /* empty */
	ASSERT_OK(vt->rollback_to(st));
	ASSERT_OK(vt->release(st));
	ASSERT_OK(vt->savepoint(st));
	ASSERT_OK(vt->exec(st, ins, 1, c, &rows));
	ASSERT_OK(vt->rollback_to(st));
	ASSERT_OK(vt->rollback_to(st));
	ASSERT_OK(vt->release(st));
	ASSERT_OK(vt->savepoint(st));
	ASSERT_OK(vt->exec(st, ins, 1, d, &rows));
	ASSERT_OK(vt->release(st));
	ASSERT_OK(vt->savepoint(st));
	ASSERT_OK(vt->exec(st, ins, 1, f, &rows));
	ASSERT_OK(vt->savepoint(st)); /* releases the previous one */
	ASSERT_OK(vt->exec(st, ins, 1, g, &rows));
	ASSERT_OK(vt->rollback_to(st));
	ASSERT_OK(vt->commit(st));
	ASSERT_STREQ(scalar(st, "SELECT count(*) FROM %s", t), "3"); /* adf */
	ASSERT_EQ(count(st, t, "k IN ('a', 'd', 'f')"), 3);
	/* nothing ran: commit and rollback succeed */
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(vt->savepoint(st));
	ASSERT_OK(vt->release(st));
	ASSERT_OK(vt->commit(st));
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(vt->rollback(st));
	/* rollback undoes everything, savepoints and all */
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(vt->exec(st, ins, 1, b, &rows));
	ASSERT_OK(vt->savepoint(st));
	ASSERT_OK(vt->exec(st, ins, 1, c, &rows));
	ASSERT_OK(vt->rollback(st));
	ASSERT_EQ(count(st, t, NULL), 3);
	/* many savepoints in a row overflow nothing */
	ASSERT_OK(vt->begin(st));
	for (int i = 0; i < 20; i++) {
		ASSERT_OK(vt->savepoint(st));
		ASSERT_EQ(vt->exec(st, ins, 1, a, &rows), INBOX_ERR_STORE);
		ASSERT_OK(vt->rollback_to(st));
		ASSERT_OK(vt->release(st));
	}
	for (int i = 0; i < 20; i++)
		ASSERT_OK(vt->savepoint(st));
	ASSERT_OK(vt->exec(st, ins, 1, c, &rows));
	ASSERT_OK(vt->commit(st));
	ASSERT_EQ(count(st, t, NULL), 4);
	env_teardown(&e);
}

/* dead_letter: only in a transaction; the payload kept byte for byte
 * (bytes that are not UTF-8, NUL inside), headers, reason, attempts,
 * fingerprints; a keyless one with no payload is kept with an empty one;
 * ids grow. (Was dead_letter_blob of test_sqlite_store and
 * dead_letter_binary_payload of test_pg_store; PostgreSQL's U+FFFD for a
 * key that is not UTF-8 stays there.) */
TEST(slot_dead_letter_payload)
{
	env e;
	ASSERT_OK(env_setup(&e));
	inbox_store *st = e.st;
	const inbox_store_vtable *vt = st->vt;
	static const char payload[] = "\xff\xfe\x00{\"a\":1}\x80";
	inbox_dead_letter dl = {
	    .consumer = "dl",
	    .key = "k",
	    .message_id = "m-9",
	    .payload = payload,
	    .payload_len = sizeof(payload) - 1,
	    .headers = "{\"h\":\"v\"}",
	    .position = "p:1",
	    .attempts = 3,
	    .reason = "fingerprint conflict",
	    .fingerprint = SL_FPB,
	    .stored_fingerprint = SL_FPA,
	};
	int64_t id1 = 0, id2 = 0;
	/* outside a transaction: SQLite refuses it (STATE); PostgreSQL
	 * writes it in autocommit (the contract says "in the open
	 * transaction"; the core never calls it outside one). Kept as
	 * SQLite's own, as it was. */
	if (!is_pg)
		ASSERT_EQ(vt->dead_letter(st, &dl, &id1), INBOX_ERR_STATE);
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(vt->dead_letter(st, &dl, &id1));
	ASSERT_TRUE(id1 > 0);
	dl.key = NULL;
	dl.payload = NULL;
	dl.payload_len = 0;
	dl.reason = "no key";
	ASSERT_OK(vt->dead_letter(st, &dl, &id2));
	ASSERT_TRUE(id2 > id1);
	ASSERT_OK(vt->commit(st));
	inbox_admin_dead_letter *got = NULL;
	ASSERT_OK(inbox_admin_dlq_get(st, id1, "dl", &got));
	ASSERT_EQ(got->payload_len, sizeof(payload) - 1);
	ASSERT_TRUE(memcmp(got->payload, payload, sizeof(payload) - 1) == 0);
	ASSERT_STREQ(got->key, "k");
	ASSERT_STREQ(got->headers, "{\"h\":\"v\"}");
	ASSERT_STREQ(got->reason, "fingerprint conflict");
	ASSERT_EQ(got->attempts, 3);
	ASSERT_STREQ(got->stored_fingerprint, SL_FPA);
	inbox_admin_dead_letter_free(got);
	got = NULL;
	ASSERT_OK(inbox_admin_dlq_get(st, id2, "dl", &got));
	ASSERT_EQ(got->payload_len, 0);
	ASSERT_TRUE(got->key == NULL);
	ASSERT_STREQ(got->reason, "no key");
	inbox_admin_dead_letter_free(got);
	ASSERT_EQ(count(st, e.dl_tbl, "key IS NULL AND payload IS NOT NULL"),
	          1);
	env_teardown(&e);
}

/* dead_letter with a dedup_key: a repeat of the consumer's earlier one
 * adds no row (in the same transaction or a later one, also once
 * replayed: pending again), counts a delivery, takes the newer reason
 * and attempts; another consumer's, or one without a key, is a row of
 * its own; writers of the same keys at once (three processes, 40 keys in
 * one transaction each) end with one row per key, every delivery
 * counted. (Was dead_letter_dedup of test_sqlite_store and of
 * test_pg_store.) */
TEST(slot_dead_letter_dedup)
{
	env e;
	ASSERT_OK(env_setup(&e));
	inbox_store *st = e.st;
	const inbox_store_vtable *vt = st->vt;
	inbox_dead_letter dl = {.consumer = "c",
	                        .payload = "{bad",
	                        .payload_len = 4,
	                        .attempts = 1,
	                        .reason = "malformed JSON",
	                        .dedup_key = SL_FPA};
	int64_t a = 0, b = 0, c = 0, d = 0, x = 0;
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(vt->dead_letter(st, &dl, &a));
	dl.reason = "malformed JSON, again";
	dl.attempts = 2;
	ASSERT_OK(vt->dead_letter(st, &dl, &b)); /* the same transaction */
	ASSERT_OK(vt->commit(st));
	ASSERT_EQ(b, a);
	ASSERT_OK(inbox_admin_dlq_mark_replayed(st, a));
	ASSERT_OK(vt->begin(st));
	dl.attempts = 4;
	ASSERT_OK(vt->dead_letter(st, &dl, &c)); /* a later one */
	dl.consumer = "other";                   /* another consumer's */
	ASSERT_OK(vt->dead_letter(st, &dl, &d));
	dl.consumer = "c";
	dl.dedup_key = NULL; /* no identity: a row of its own, always */
	ASSERT_OK(vt->dead_letter(st, &dl, &x));
	ASSERT_OK(vt->commit(st));
	ASSERT_EQ(c, a);
	ASSERT_TRUE(d != a && x != a && x != d);
	ASSERT_EQ(count(st, e.dl_tbl, NULL), 3);
	inbox_admin_dead_letter *got = NULL;
	ASSERT_OK(inbox_admin_dlq_get(st, a, NULL, &got));
	ASSERT_EQ(got->deliveries, 3);
	ASSERT_EQ(got->attempts, 4);
	ASSERT_STREQ(got->reason, "malformed JSON, again");
	ASSERT_EQ(got->replayed_at_ms, 0); /* pending again */
	ASSERT_TRUE(got->created_at_ms > 0);
	ASSERT_TRUE(got->last_seen_at_ms >= got->created_at_ms);
	inbox_admin_dead_letter_free(got);

	enum { KIDS = 3, KEYS = 40 };
	fflush(NULL);
	pid_t kids[KIDS];
	for (int k = 0; k < KIDS; k++) {
		kids[k] = fork();
		ASSERT_TRUE(kids[k] >= 0);
		if (kids[k] == 0) {
			inbox_store *cs = open_store(&e);
			int bad = !cs || cs->vt->begin(cs) != 0;
			char key[65];
			for (int i = 0; !bad && i < KEYS; i++) {
				int64_t id;
				snprintf(key, sizeof(key), "%064d", i);
				inbox_dead_letter y = dl;
				y.consumer = "race";
				y.dedup_key = key;
				bad = cs->vt->dead_letter(cs, &y, &id) != 0;
				sleep_ms(1);
			}
			bad = bad || cs->vt->commit(cs) != 0;
			inbox_store_close(cs);
			_exit(bad ? 1 : 0);
		}
	}
	for (int k = 0; k < KIDS; k++) {
		int status = 0;
		ASSERT_EQ(waitpid(kids[k], &status, 0), kids[k]);
		ASSERT_TRUE(WIFEXITED(status));
		ASSERT_EQ(WEXITSTATUS(status), 0);
	}
	ASSERT_EQ(count(st, e.dl_tbl, "consumer = 'race'"), KEYS);
	ASSERT_STREQ(scalar(st,
	                    "SELECT sum(deliveries) FROM %s WHERE consumer "
	                    "= 'race'",
	                    e.dl_tbl),
	             "120");
	env_teardown(&e);
}

/* rows of consumer `who`, keys pfx0.., in status `final`, processed
 * `age_s` ago (processing and failed rows too: purge must go by the
 * status, not the timestamp) */
static int sl_seed(env *e, const char *who, const char *pfx, int n,
                   inbox_status final, int age_s)
{
	inbox_store *st = e->st;
	char keys[16][32];
	inbox_claim c[16];
	memset(c, 0, sizeof(c));
	for (int i = 0; i < n; i++) {
		snprintf(keys[i], sizeof(keys[i]), "%s%d", pfx, i);
		c[i].key = keys[i];
		c[i].fingerprint = SL_FPA;
	}
	int rc = st->vt->begin(st);
	if (!rc)
		rc = st->vt->claim(st, who, c, (size_t)n, INBOX_ST_PROCESSING,
		                   60000);
	for (int i = 0; !rc && final != INBOX_ST_PROCESSING && i < n; i++) {
		int64_t rows;
		rc = st->vt->finish(st, who, keys[i], 1, INBOX_ST_NONE, final,
		                    0, &rows);
	}
	if (!rc)
		rc = st->vt->commit(st);
	else
		st->vt->rollback(st);
	if (!rc && is_pg)
		rc = sql(st,
		         "UPDATE %s SET processed_at = coalesce(processed_at, "
		         "created_at) - interval '%d seconds' WHERE consumer = "
		         "'%s' AND key LIKE '%s%%'",
		         e->inbox_tbl, age_s, who, pfx);
	else if (!rc)
		rc = sql(st,
		         "UPDATE %s SET processed_at = coalesce(processed_at, "
		         "created_at) - %lld WHERE consumer = '%s' AND key "
		         "LIKE '%s%%'",
		         e->inbox_tbl, (long long)age_s * 1000, who, pfx);
	return rc;
}

/* purge: completed and dead records older than the window, in batches,
 * never a processing or failed one, never another consumer's; a dry run
 * counts and deletes nothing; the registered window when none is given,
 * refused for a consumer without one, never one shorter than the
 * registered; NULL: every registered consumer by its own window;
 * refused in a transaction. (Was purge_batches of test_sqlite_store and
 * of test_pg_store.) */
TEST(slot_purge_batches)
{
	env e;
	ASSERT_OK(env_setup(&e));
	inbox_store *st = e.st;
	const inbox_store_vtable *vt = st->vt;
	int64_t n = -1;
	ASSERT_OK(vt->register_consumer(st, "c", 3600));
	ASSERT_OK(vt->register_consumer(st, "c", 3600)); /* kept */
	ASSERT_OK(sl_seed(&e, "c", "oldc", 5, INBOX_ST_COMPLETED, 7200));
	ASSERT_OK(sl_seed(&e, "c", "oldd", 2, INBOX_ST_DEAD, 7200));
	ASSERT_OK(sl_seed(&e, "c", "newc", 2, INBOX_ST_COMPLETED, 60));
	ASSERT_OK(sl_seed(&e, "c", "oldp", 1, INBOX_ST_PROCESSING, 7200));
	ASSERT_OK(sl_seed(&e, "c", "oldf", 1, INBOX_ST_FAILED, 7200));
	ASSERT_OK(sl_seed(&e, "other", "oldo", 4, INBOX_ST_COMPLETED, 7200));
	ASSERT_EQ(count(st, e.inbox_tbl, NULL), 15);

	ASSERT_OK(inbox_store_purge(st, "c", 0, 3, 1, &n)); /* dry run */
	ASSERT_EQ(n, 7);
	ASSERT_EQ(count(st, e.inbox_tbl, NULL), 15);
	ASSERT_OK(inbox_store_purge(st, "c", 0, 3, 0, &n));
	ASSERT_EQ(n, 7);
	ASSERT_EQ(st->in_txn, 0);
	ASSERT_EQ(count(st, e.inbox_tbl, "consumer = 'c'"), 4);
	ASSERT_EQ(count(st, e.inbox_tbl,
	                "consumer = 'c' AND key IN ('newc0', 'newc1', "
	                "'oldf0', 'oldp0')"),
	          4);
	ASSERT_OK(inbox_store_purge(st, "c", 0, 3, 0, &n));
	ASSERT_EQ(n, 0);
	/* shorter than the registered window: refused; longer: allowed */
	ASSERT_EQ(inbox_store_purge(st, "c", 30, 3, 1, &n), INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_store_errmsg(st), "shorter than the 3600s");
	ASSERT_OK(inbox_store_purge(st, "c", 7200 * 2, 3, 1, &n));
	ASSERT_EQ(n, 0);
	/* not registered and no window: refused, nothing deleted */
	ASSERT_EQ(inbox_store_purge(st, "other", 0, 3, 0, &n),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_store_errmsg(st), "retention");
	ASSERT_CONTAINS(inbox_store_errmsg(st), "other");
	ASSERT_EQ(count(st, e.inbox_tbl, "consumer = 'other'"), 4);
	/* NULL: registered consumers only, each by its own window */
	ASSERT_OK(sl_seed(&e, "c", "late", 2, INBOX_ST_COMPLETED, 7200));
	ASSERT_OK(inbox_store_purge(st, NULL, 0, 0, 1, &n));
	ASSERT_EQ(n, 2);
	ASSERT_OK(inbox_store_purge(st, NULL, 0, 0, 0, &n));
	ASSERT_EQ(n, 2);
	ASSERT_EQ(count(st, e.inbox_tbl, "consumer = 'other'"), 4);
	ASSERT_OK(vt->register_consumer(st, "other", 600));
	ASSERT_OK(inbox_store_purge(st, NULL, 0, 3, 1, &n));
	ASSERT_EQ(n, 4);
	ASSERT_OK(inbox_store_purge(st, NULL, 0, 3, 0, &n));
	ASSERT_EQ(n, 4);
	ASSERT_EQ(count(st, e.inbox_tbl, NULL), 4);
	/* an explicit window for one consumer */
	ASSERT_OK(sl_seed(&e, "other", "o2", 2, INBOX_ST_COMPLETED, 7200));
	ASSERT_OK(inbox_store_purge(st, "other", 3 * 3600, 1, 0, &n));
	ASSERT_EQ(n, 0);
	ASSERT_OK(inbox_store_purge(st, "other", 3600, 1, 0, &n));
	ASSERT_EQ(n, 2);
	/* inside a transaction: refused */
	ASSERT_OK(vt->begin(st));
	ASSERT_EQ(inbox_store_purge(st, "c", 0, 3, 0, &n), INBOX_ERR_STATE);
	ASSERT_OK(vt->rollback(st));
	env_teardown(&e);
}

/* client_version (vtable version 7): the store names its client library
 * and its run-time version through the registry, which inbox --version
 * asks; past the last store: NOTFOUND. */
TEST(slot_client_version)
{
	env e;
	ASSERT_OK(env_setup(&e));
	const inbox_store_vtable *vt = e.st->vt;
	ASSERT_TRUE(vt->client_version != NULL);
	size_t i = 0, n = 0;
	while (inbox_store_scheme(n))
		n++;
	while (i < n && strcmp(inbox_store_scheme(i), vt->scheme) != 0)
		i++;
	ASSERT_TRUE(i < n);
	char v[96], w[96];
	int len = inbox_store_client_version(i, v, sizeof(v));
	ASSERT_TRUE(len > 0 && (size_t)len == strlen(v));
	ASSERT_EQ(vt->client_version(w, sizeof(w)), len);
	ASSERT_STREQ(v, w);
	ASSERT_CONTAINS(v, is_pg ? "libpq " : "sqlite ");
	ASSERT_TRUE(strpbrk(v, "0123456789") != NULL);
	char small[4] = "xyz";
	ASSERT_EQ(inbox_store_client_version(i, small, sizeof(small)), len);
	ASSERT_EQ(strlen(small), 3); /* cut, NUL-terminated */
	ASSERT_EQ(inbox_store_client_version(n, v, sizeof(v)),
	          INBOX_ERR_NOTFOUND);
	ASSERT_STREQ(v, "");
	env_teardown(&e);
}

/* ---- upgrades: a database left at an older schema version ---- */

/* Each store's own migration, run only up to a version (src/store/). */
int inbox__pg_migrate_to(inbox_store *st, int version);
int inbox__sq_migrate_to(inbox_store *st, int version);

/* e on a fresh prefix (no tables of its own) and its store at schema
 * `version` exactly, opened without auto-migration: the old database an
 * upgrade case starts from. Reopen with open_store(e) to upgrade it;
 * NULL on failure (printed). */
static inbox_store *sl_open_at_version(env *e, int version)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->prefix, sizeof(e->prefix), "c%d_%d_", (int)getpid(),
	         ++test_seq);
	snprintf(e->inbox_tbl, sizeof(e->inbox_tbl), "\"%sinbox\"", e->prefix);
	inbox_store_options so = INBOX_STORE_OPTIONS_INIT;
	so.table_prefix = e->prefix;
	so.auto_migrate = 0;
	inbox_store *st = NULL;
	int v = 0, rc = inbox_store_open(&st, URL, &so);
	if (rc == INBOX_OK)
		rc = is_pg ? inbox__pg_migrate_to(st, version)
		           : inbox__sq_migrate_to(st, version);
	if (rc == INBOX_OK)
		rc = inbox_store_schema_version(st, &v);
	if (rc != INBOX_OK || v != version) {
		fprintf(stderr, "store at version %d: %d (at %d) %s\n", version,
		        rc, v, inbox_store_errmsg(st));
		inbox_store_close(st);
		return NULL;
	}
	return st;
}

/* The old database of an upgrade case: one completed record of key
 * "old-1" (payload `old`) written with the old schema's own columns, a
 * check that the old schema lacks `column` (what the step adds), and on
 * PostgreSQL generation 1 sealed, so that the step must reach a sealed
 * generation too. 0, or -1 (printed). */
static int sl_old_record(inbox_store *st, const env *e, const char *old,
                         const char *column)
{
	char fp[65], q[256];
	int64_t rows = 0;
	int sealed = 0;
	if (inbox_fingerprint(old, strlen(old), "", fp, NULL, 0) != 0)
		return -1;
	int rc = is_pg ? sql(st,
	                     "INSERT INTO %s (gen, consumer, key, fingerprint,"
	                     " status, attempts, fence, processed_at)"
	                     " VALUES (1, 'c', 'old-1', '%s', 'completed', 1,"
	                     " 1, now())",
	                     e->inbox_tbl, fp)
	               : sql(st,
	                     "INSERT INTO %s (consumer, key, fingerprint,"
	                     " status, attempts, fence, created_at,"
	                     " processed_at, updated_at) VALUES ('c', 'old-1',"
	                     " '%s', 'completed', 1, 1, 1700000000000,"
	                     " 1700000000000, 1700000000000)",
	                     e->inbox_tbl, fp);
	if (rc != 0)
		return -1;
	snprintf(q, sizeof(q), "SELECT %s FROM %s", column, e->inbox_tbl);
	if (st->vt->exec(st, q, 0, NULL, &rows) == 0) {
		fprintf(stderr, "the old schema already has %s\n", column);
		return -1;
	}
	if (is_pg && (inbox_store_seal(st, 1, &sealed) != 0 || sealed != 1)) {
		fprintf(stderr, "seal of the old generation: %d\n", sealed);
		return -1;
	}
	return 0;
}

/* Stored results (schema version 5): the upgrade case's handler. */
static int sl_v5_handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	(void)m;
	(void)p;
	return inbox_txn_set_result(t, "text/plain", "r-new", 5) == 0
	           ? INBOX_HANDLER_OK
	           : INBOX_HANDLER_REJECT;
}

/* A v4 database upgrades to v5 on its own (the step needs nothing
 * else): its records are kept, in every generation (PostgreSQL seals
 * the old one first), and hold no result — a duplicate of one has none,
 * first outcome applied — and new records store theirs; the columns
 * reach the sealed generation too. (Was upgrade_from_v4_results of
 * test_sqlite_store and test_pg_store.) */
TEST(slot_upgrade_from_v4_results)
{
	env e;
	inbox_store *st = sl_open_at_version(&e, 4);
	ASSERT_TRUE(st != NULL);
	const char *old = "{\"id\":\"old-1\"}";
	ASSERT_OK(sl_old_record(st, &e, old, "result"));
	inbox_store_close(st);
	st = open_store(&e); /* auto-migration: the v5 step and later ones */
	ASSERT_TRUE(st != NULL);
	int v = 0;
	ASSERT_OK(inbox_store_schema_version(st, &v));
	/* the current version (the store tests' upgrade cases check it
	 * exactly), one schema_version row per step */
	ASSERT_TRUE(v >= 5);
	char tbl[96];
	snprintf(tbl, sizeof(tbl), "\"%sschema_version\"", e.prefix);
	ASSERT_EQ(count(st, tbl, NULL), v);
	if (is_pg)
		snprintf(tbl, sizeof(tbl), "\"%sinbox_g1\"", e.prefix);
	else
		snprintf(tbl, sizeof(tbl), "%s", e.inbox_tbl);
	ASSERT_EQ(count(st, tbl,
	                "result IS NULL AND result_type IS NULL AND outcome"
	                " IS NULL"),
	          1);
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = "c";
	co.handler = sl_v5_handler;
	inbox_consumer *c = NULL;
	char err[256];
	ASSERT_OK(inbox_consumer_open(&c, st, &co, err, sizeof(err)));
	inbox_delivery d = INBOX_DELIVERY_INIT;
	d.payload = old;
	d.payload_len = strlen(old);
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_EQ(r.first_outcome, INBOX_APPLIED);
	ASSERT_TRUE(r.result == NULL && r.result_type == NULL);
	const char *nw = "{\"id\":\"new-1\"}";
	d.payload = nw;
	d.payload_len = strlen(nw);
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_EQ(r.result_len, 5);
	ASSERT_TRUE(r.result && memcmp(r.result, "r-new", 5) == 0);
	ASSERT_STREQ(r.result_type, "text/plain");
	inbox_consumer_close(c);
	inbox_store_close(st);
}

/* Source positions on the records (schema version 6): the upgrade
 * case's handler rejects the message whose id starts with "bad". */
static int sl_v6_handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	(void)t;
	(void)p;
	const char *id = inbox_msg_id(m);
	return id && !strncmp(id, "bad", 3) ? INBOX_HANDLER_REJECT
	                                    : INBOX_HANDLER_OK;
}

static int sl_key_seen(const char *key, void *payload)
{
	snprintf(payload, 64, "%s", key ? key : "(null)");
	return 0;
}

/* The record's position read back by the admin API ("(null)" for NULL,
 * "(none)" without a record). */
static const char *sl_pos_of(inbox_store *st, const char *key, char *out)
{
	inbox_admin_record *r = NULL;
	if (inbox_admin_inspect(st, "c", key, &r) != INBOX_OK)
		snprintf(out, 64, "(none)");
	else
		snprintf(out, 64, "%s", r->position ? r->position : "(null)");
	inbox_admin_record_free(r);
	return out;
}

/* The key a look-up by position finds ("" for none, "(n)" for n > 1). */
static const char *sl_key_at(inbox_store *st, const char *pos, char *out)
{
	int found = 0;
	out[0] = '\0';
	if (inbox_admin_find_keys(st, "c", NULL, pos, sl_key_seen, out,
	                          &found) != INBOX_OK)
		snprintf(out, 64, "(error)");
	else if (found > 1)
		snprintf(out, 64, "(%d)", found);
	return out;
}

/* A v5 database upgrades to v6 on its own: its records (PostgreSQL: in
 * a sealed generation) are kept with no position; a new record keeps
 * its delivery's (applied or dead), a redelivery (a duplicate) and a
 * copy from another position leave it, sealing its generation keeps it
 * (PostgreSQL), and a look-up by position finds the record's key. A
 * position that is not UTF-8 is kept, not refused, as the same text on
 * both stores (each such byte as \xHH: the core's), found by it and by
 * the bytes it came with. (Was upgrade_from_v5_positions of
 * test_sqlite_store and test_pg_store.) */
TEST(slot_upgrade_from_v5_positions)
{
	env e;
	char buf[64];
	inbox_store *st = sl_open_at_version(&e, 5);
	ASSERT_TRUE(st != NULL);
	const char *old = "{\"id\":\"old-1\"}";
	ASSERT_OK(sl_old_record(st, &e, old, "position"));
	int sealed = 0;
	inbox_store_close(st);
	st = open_store(&e); /* auto-migration: the v6 step and later ones */
	ASSERT_TRUE(st != NULL);
	int v = 0;
	ASSERT_OK(inbox_store_schema_version(st, &v));
	ASSERT_TRUE(v >= 6);
	char tbl[96];
	if (is_pg)
		snprintf(tbl, sizeof(tbl), "\"%sinbox_g1\"", e.prefix);
	else
		snprintf(tbl, sizeof(tbl), "%s", e.inbox_tbl);
	ASSERT_EQ(count(st, tbl, "position IS NULL"), 1);
	ASSERT_STREQ(sl_pos_of(st, "old-1", buf), "(null)");
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = "c";
	co.handler = sl_v6_handler;
	inbox_consumer *c = NULL;
	char err[256];
	ASSERT_OK(inbox_consumer_open(&c, st, &co, err, sizeof(err)));
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT, INBOX_DELIVERY_INIT,
	                       INBOX_DELIVERY_INIT, INBOX_DELIVERY_INIT};
	inbox_result r[4] = {INBOX_RESULT_INIT, INBOX_RESULT_INIT,
	                     INBOX_RESULT_INIT, INBOX_RESULT_INIT};
	const char *pay[4] = {"{\"id\":\"new-1\"}", "{\"id\":\"bad-1\"}",
	                      "{\"id\":\"new-2\"}", "{\"id\":\"new-3\"}"};
	const char *pos[4] = {"orders/0@7", "orders/0@8", NULL,
	                      "f\xffile.jsonl:3"};
	for (int i = 0; i < 4; i++) {
		d[i].payload = pay[i];
		d[i].payload_len = strlen(pay[i]);
		d[i].position = pos[i];
	}
	ASSERT_OK(inbox_consumer_process_batch(c, d, 4, r));
	ASSERT_EQ(r[0].outcome, INBOX_APPLIED);
	ASSERT_EQ(r[1].outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(r[2].outcome, INBOX_APPLIED);
	ASSERT_EQ(r[3].outcome, INBOX_APPLIED);
	ASSERT_STREQ(sl_pos_of(st, "new-1", buf), "orders/0@7");
	ASSERT_STREQ(sl_pos_of(st, "bad-1", buf), "orders/0@8");
	ASSERT_STREQ(sl_pos_of(st, "new-2", buf), "(null)");
	/* PostgreSQL's text must be UTF-8, SQLite's need not be: the core
	 * gives both the byte as the text \xff, what inspect prints */
	ASSERT_STREQ(sl_pos_of(st, "new-3", buf), "f\\xffile.jsonl:3");
	ASSERT_STREQ(sl_key_at(st, "f\\xffile.jsonl:3", buf), "new-3");
	ASSERT_STREQ(sl_key_at(st, "f\xffile.jsonl:3", buf), "new-3");
	/* redelivered (the same positions): duplicates, the records stay */
	ASSERT_OK(inbox_consumer_process_batch(c, d, 2, r));
	ASSERT_EQ(r[0].outcome, INBOX_DUPLICATE);
	ASSERT_EQ(r[1].outcome, INBOX_DUPLICATE);
	if (is_pg) {
		/* sealed: the records keep their positions */
		ASSERT_OK(inbox_store_seal(st, 1, &sealed));
		ASSERT_EQ(sealed, 2); /* the generation sealed */
		snprintf(tbl, sizeof(tbl), "\"%sinbox_g2\"", e.prefix);
		ASSERT_EQ(count(st, tbl, "position = 'orders/0@7'"), 1);
	}
	/* a copy from another position writes nothing */
	d[0].position = "orders/1@3";
	ASSERT_OK(inbox_consumer_process(c, &d[0], &r[0]));
	ASSERT_EQ(r[0].outcome, INBOX_DUPLICATE);
	ASSERT_STREQ(sl_pos_of(st, "new-1", buf), "orders/0@7");
	ASSERT_STREQ(sl_key_at(st, "orders/0@7", buf), "new-1");
	ASSERT_STREQ(sl_key_at(st, "orders/0@8", buf), "bad-1");
	ASSERT_STREQ(sl_key_at(st, "orders/1@3", buf), "");
	ASSERT_STREQ(sl_key_at(st, "orders/9@9", buf), "");
	inbox_consumer_close(c);
	inbox_store_close(st);
}
