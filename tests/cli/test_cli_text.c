/* The inbox command's text helpers: ages with two units (a headroom of
 * 2d23h was shown as 2d). */
#include <string.h>

#include "cli/progress.h"
#include "test.h"

static const char *age(long long ms)
{
	static char buf[32];
	return cli_age_text((int64_t)ms, buf, sizeof(buf));
}

TEST(ages_keep_their_second_unit)
{
	ASSERT_STREQ(age(0), "0s");
	ASSERT_STREQ(age(45000), "45s");
	ASSERT_STREQ(age(60000), "1m");
	ASSERT_STREQ(age(200000), "3m20s");
	ASSERT_STREQ(age(3600000), "1h");
	ASSERT_STREQ(age(5 * 3600000LL + 12 * 60000), "5h12m");
	ASSERT_STREQ(age(7 * 86400000LL), "7d");
	ASSERT_STREQ(age(2 * 86400000LL + 23 * 3600000LL + 59 * 60000),
	             "2d23h");
	ASSERT_STREQ(age(-(90 * 60000LL)), "-1h30m");
	ASSERT_STREQ(age(999), "0s");
}

int main(void)
{
	RUN(ages_keep_their_second_unit);
	return test_summary();
}
