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
