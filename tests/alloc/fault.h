/*
 * Allocation fault injection for tests (SQLite's fault simulation, curl's
 * torture tests): make the Nth allocation fail and see that the call under
 * test reports INBOX_ERR_NOMEM, commits nothing half-way, leaks nothing
 * and that the next call works.
 *
 * What is counted, on the thread that armed the hook only (so the
 * library's and the test's other threads — librdkafka's, the mock
 * cluster's — never see a failure and the count is deterministic):
 *   - malloc, calloc, realloc, strdup, strndup called by libinbox itself
 *     and by the test program: the test executable is linked with
 *     -Wl,--wrap=malloc,... against the static internal library, so
 *     every call our objects make goes through fault.c. Calls inside
 *     shared libraries (libpq, librdkafka, libc itself) are not wrapped:
 *     their own out-of-memory handling is out of scope;
 *   - jansson's allocations (json_set_alloc_funcs), SQLite's
 *     (sqlite3_config(SQLITE_CONFIG_MALLOC)) and OpenSSL's
 *     (CRYPTO_set_mem_functions): libraries we call that report an
 *     allocation failure back to us, which we must then handle.
 *
 * fault_install() must run first in main(), before any of those libraries
 * allocates.
 *
 * INBOX_FAULT_TRACE=1 in the environment prints a backtrace of each
 * injected failure (to find which path mishandled it).
 */
#ifndef INBOX_TEST_FAULT_H
#define INBOX_TEST_FAULT_H

/* Route jansson's, SQLite's and OpenSSL's allocations through the hook.
 * 0, or -1 if a library refused (already initialized). */
int fault_install(void);

/* Fail the nth allocation (1-based) this thread makes from now on, and
 * only that one; n <= 0 disarms. */
void fault_arm(long n);

/* Disarm. Returns 1 if the armed failure was injected, 0 if the thread
 * made fewer than n allocations meanwhile. */
int fault_disarm(void);

/* Allocations counted on this thread since fault_arm (armed or not). */
long fault_count(void);

#endif
