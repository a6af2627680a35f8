/*
 * A tiny test harness: assertions print both sides, the binary ends with
 * an "N passed, N failed" line and exits non-zero on any failure.
 *
 *   TEST(name) { ASSERT_EQ(1, 1); }
 *   int main(void) { RUN(name); return test_summary(); }
 */
#ifndef INBOX_TEST_H
#define INBOX_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test__passed, test__failed, test__cur_failed;
static const char *test__cur;

#define TEST(name) static void test_##name(void)

/* Results whose every element carries its version (docs/abi.md: an
 * array's layout is its first element's, so each element that starts a
 * call's array, or is passed alone, needs it). */
#define TEST_RESULTS_INIT(a, n)                                                \
	do {                                                                   \
		for (size_t test__i = 0; test__i < (size_t)(n); test__i++)     \
			(a)[test__i] = (inbox_result)INBOX_RESULT_INIT;        \
	} while (0)

/* Deliveries whose every element carries its version (an input array
 * carries it in every element, all the same: docs/abi.md). */
#define TEST_DELIVERIES_INIT(a, n)                                             \
	do {                                                                   \
		for (size_t test__i = 0; test__i < (size_t)(n); test__i++)     \
			(a)[test__i] = (inbox_delivery)INBOX_DELIVERY_INIT;    \
	} while (0)

#define RUN(name)                                                              \
	do {                                                                   \
		test__cur = #name;                                             \
		test__cur_failed = 0;                                          \
		test_##name();                                                 \
		if (test__cur_failed) {                                        \
			test__failed++;                                        \
			printf("FAIL %s\n", #name);                            \
		} else {                                                       \
			test__passed++;                                        \
			printf("ok   %s\n", #name);                            \
		}                                                              \
		fflush(stdout);                                                \
	} while (0)

#define TEST_FAIL_(...)                                                        \
	do {                                                                   \
		fprintf(stderr, "  %s:%d: [%s] ", __FILE__, __LINE__,          \
		        test__cur);                                            \
		fprintf(stderr, __VA_ARGS__);                                  \
		fputc('\n', stderr);                                           \
		test__cur_failed = 1;                                          \
	} while (0)

/* Integer assertions (compared as int64). Failing returns from the test. */
#define ASSERT_EQ(a, b)                                                        \
	do {                                                                   \
		long long a_ = (long long)(a), b_ = (long long)(b);            \
		if (a_ != b_) {                                                \
			TEST_FAIL_("ASSERT_EQ(%s, %s): %lld != %lld", #a, #b,  \
			           a_, b_);                                    \
			return;                                                \
		}                                                              \
	} while (0)
#define ASSERT_NE(a, b)                                                        \
	do {                                                                   \
		long long a_ = (long long)(a), b_ = (long long)(b);            \
		if (a_ == b_) {                                                \
			TEST_FAIL_("ASSERT_NE(%s, %s): both %lld", #a, #b,     \
			           a_);                                        \
			return;                                                \
		}                                                              \
	} while (0)
#define ASSERT_TRUE(c)                                                         \
	do {                                                                   \
		if (!(c)) {                                                    \
			TEST_FAIL_("ASSERT_TRUE(%s)", #c);                     \
			return;                                                \
		}                                                              \
	} while (0)
#define ASSERT_STREQ(a, b)                                                     \
	do {                                                                   \
		const char *a_ = (a), *b_ = (b);                               \
		if (!a_ || !b_ || strcmp(a_, b_) != 0) {                       \
			TEST_FAIL_("ASSERT_STREQ(%s, %s): \"%s\" != \"%s\"",   \
			           #a, #b, a_ ? a_ : "(null)",                 \
			           b_ ? b_ : "(null)");                        \
			return;                                                \
		}                                                              \
	} while (0)
#define ASSERT_CONTAINS(hay, needle)                                           \
	do {                                                                   \
		const char *h_ = (hay), *n_ = (needle);                        \
		if (!h_ || !strstr(h_, n_)) {                                  \
			TEST_FAIL_("ASSERT_CONTAINS(%s, %s): \"%s\" lacks "    \
			           "\"%s\"",                                   \
			           #hay, #needle, h_ ? h_ : "(null)", n_);     \
			return;                                                \
		}                                                              \
	} while (0)
/* For library calls: rc must be 0, print the rc otherwise. */
#define ASSERT_OK(expr)                                                        \
	do {                                                                   \
		int rc_ = (expr);                                              \
		if (rc_ != 0) {                                                \
			TEST_FAIL_("%s returned %d", #expr, rc_);              \
			return;                                                \
		}                                                              \
	} while (0)

static inline int test_summary(void)
{
	printf("%d passed, %d failed\n", test__passed, test__failed);
	return test__failed ? 1 : 0;
}

#endif
