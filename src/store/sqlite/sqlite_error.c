/* SQLite result codes -> libinbox errors and symbolic code names. */
#include <stddef.h>

#include "store/sqlite/sqlite_store.h"

typedef struct code_name {
	int code;
	const char *name;
} code_name;

#define C(x)                                                                   \
	{                                                                      \
		x, #x                                                          \
	}
/* sqlite3 offers only English text (sqlite3_errstr); operators and tests
 * want the symbol, as with a PostgreSQL SQLSTATE. Unknown extended codes
 * fall back to the primary code's name. */
static const code_name names[] = {
    C(SQLITE_OK),
    C(SQLITE_ERROR),
    C(SQLITE_INTERNAL),
    C(SQLITE_PERM),
    C(SQLITE_ABORT),
    C(SQLITE_BUSY),
    C(SQLITE_LOCKED),
    C(SQLITE_NOMEM),
    C(SQLITE_READONLY),
    C(SQLITE_INTERRUPT),
    C(SQLITE_IOERR),
    C(SQLITE_CORRUPT),
    C(SQLITE_NOTFOUND),
    C(SQLITE_FULL),
    C(SQLITE_CANTOPEN),
    C(SQLITE_PROTOCOL),
    C(SQLITE_EMPTY),
    C(SQLITE_SCHEMA),
    C(SQLITE_TOOBIG),
    C(SQLITE_CONSTRAINT),
    C(SQLITE_MISMATCH),
    C(SQLITE_MISUSE),
    C(SQLITE_NOLFS),
    C(SQLITE_AUTH),
    C(SQLITE_FORMAT),
    C(SQLITE_RANGE),
    C(SQLITE_NOTADB),
    C(SQLITE_NOTICE),
    C(SQLITE_WARNING),
    C(SQLITE_ROW),
    C(SQLITE_DONE),
    C(SQLITE_ERROR_MISSING_COLLSEQ),
    C(SQLITE_ERROR_RETRY),
    C(SQLITE_ERROR_SNAPSHOT),
    C(SQLITE_IOERR_READ),
    C(SQLITE_IOERR_SHORT_READ),
    C(SQLITE_IOERR_WRITE),
    C(SQLITE_IOERR_FSYNC),
    C(SQLITE_IOERR_DIR_FSYNC),
    C(SQLITE_IOERR_TRUNCATE),
    C(SQLITE_IOERR_FSTAT),
    C(SQLITE_IOERR_UNLOCK),
    C(SQLITE_IOERR_RDLOCK),
    C(SQLITE_IOERR_DELETE),
    C(SQLITE_IOERR_BLOCKED),
    C(SQLITE_IOERR_NOMEM),
    C(SQLITE_IOERR_ACCESS),
    C(SQLITE_IOERR_CHECKRESERVEDLOCK),
    C(SQLITE_IOERR_LOCK),
    C(SQLITE_IOERR_CLOSE),
    C(SQLITE_IOERR_DIR_CLOSE),
    C(SQLITE_IOERR_SHMOPEN),
    C(SQLITE_IOERR_SHMSIZE),
    C(SQLITE_IOERR_SHMLOCK),
    C(SQLITE_IOERR_SHMMAP),
    C(SQLITE_IOERR_SEEK),
    C(SQLITE_IOERR_DELETE_NOENT),
    C(SQLITE_IOERR_MMAP),
    C(SQLITE_IOERR_GETTEMPPATH),
    C(SQLITE_IOERR_CONVPATH),
    C(SQLITE_IOERR_VNODE),
    C(SQLITE_IOERR_AUTH),
    C(SQLITE_IOERR_BEGIN_ATOMIC),
    C(SQLITE_IOERR_COMMIT_ATOMIC),
    C(SQLITE_IOERR_ROLLBACK_ATOMIC),
    C(SQLITE_IOERR_DATA),
    C(SQLITE_IOERR_CORRUPTFS),
    C(SQLITE_LOCKED_SHAREDCACHE),
    C(SQLITE_LOCKED_VTAB),
    C(SQLITE_BUSY_RECOVERY),
    C(SQLITE_BUSY_SNAPSHOT),
    C(SQLITE_BUSY_TIMEOUT),
    C(SQLITE_CANTOPEN_NOTEMPDIR),
    C(SQLITE_CANTOPEN_ISDIR),
    C(SQLITE_CANTOPEN_FULLPATH),
    C(SQLITE_CANTOPEN_CONVPATH),
    C(SQLITE_CANTOPEN_SYMLINK),
    C(SQLITE_CORRUPT_VTAB),
    C(SQLITE_CORRUPT_SEQUENCE),
    C(SQLITE_CORRUPT_INDEX),
    C(SQLITE_READONLY_RECOVERY),
    C(SQLITE_READONLY_CANTLOCK),
    C(SQLITE_READONLY_ROLLBACK),
    C(SQLITE_READONLY_DBMOVED),
    C(SQLITE_READONLY_CANTINIT),
    C(SQLITE_READONLY_DIRECTORY),
    C(SQLITE_ABORT_ROLLBACK),
    C(SQLITE_CONSTRAINT_CHECK),
    C(SQLITE_CONSTRAINT_COMMITHOOK),
    C(SQLITE_CONSTRAINT_FOREIGNKEY),
    C(SQLITE_CONSTRAINT_FUNCTION),
    C(SQLITE_CONSTRAINT_NOTNULL),
    C(SQLITE_CONSTRAINT_PRIMARYKEY),
    C(SQLITE_CONSTRAINT_TRIGGER),
    C(SQLITE_CONSTRAINT_UNIQUE),
    C(SQLITE_CONSTRAINT_VTAB),
    C(SQLITE_CONSTRAINT_ROWID),
    C(SQLITE_CONSTRAINT_PINNED),
    C(SQLITE_CONSTRAINT_DATATYPE),
    C(SQLITE_AUTH_USER),
};
#undef C

static const char *lookup(int code)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (names[i].code == code)
			return names[i].name;
	return NULL;
}

const char *inbox__sq_code_name(int rc)
{
	const char *n = lookup(rc);
	if (!n)
		n = lookup(rc & 0xff);
	return n ? n : "SQLITE_UNKNOWN";
}

int inbox__sq_fail(sq_store *s, int rc, const char *what)
{
	const char *msg = s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
	inbox__store_seterr(&s->base, inbox__sq_code_name(rc), "%s: %s", what,
	                    msg);
	if (s->db && sqlite3_get_autocommit(s->db)) {
		s->base.in_txn = 0;
		s->sp_open = 0;
	}
	if (rc == SQLITE_IOERR_NOMEM)
		return INBOX_ERR_NOMEM;
	/* The infrastructure's faults, never a statement's or a message's:
	 * another connection holds the lock past the busy timeout; the disk
	 * is full or failing; a statement interrupted (our statement
	 * timeout). Retried, never counted toward a message's attempts. */
	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
	case SQLITE_FULL:
	case SQLITE_IOERR:
	case SQLITE_PROTOCOL:
	case SQLITE_INTERRUPT:
		return INBOX_ERR_TRANSIENT;
	case SQLITE_NOMEM:
		return INBOX_ERR_NOMEM;
	default:
		return INBOX_ERR_STORE;
	}
}
