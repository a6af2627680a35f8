/*
 * The version (<inbox/version.h>): the running library reports the
 * version its headers say, and the three numbers, the string and the
 * number agree (the build reads the string: CMakeLists.txt).
 */
#include <stdio.h>

#include <inbox/inbox.h>

#include "test.h"

TEST(parts_agree)
{
	char s[32];
	snprintf(s, sizeof(s), "%d.%d.%d", INBOX_VERSION_MAJOR,
	         INBOX_VERSION_MINOR, INBOX_VERSION_PATCH);
	ASSERT_STREQ(s, INBOX_VERSION);
	ASSERT_EQ(INBOX_VERSION_NUMBER, INBOX_VERSION_MAJOR * 1000000 +
	                                    INBOX_VERSION_MINOR * 1000 +
	                                    INBOX_VERSION_PATCH);
	ASSERT_TRUE(INBOX_VERSION_MINOR < 1000 && INBOX_VERSION_PATCH < 1000);
}

TEST(runtime_matches_headers)
{
	ASSERT_EQ(inbox_version(), INBOX_VERSION_NUMBER);
	ASSERT_STREQ(inbox_version_string(), INBOX_VERSION);
	/* static: the same pointer every time */
	ASSERT_TRUE(inbox_version_string() == inbox_version_string());
}

int main(void)
{
	RUN(parts_agree);
	RUN(runtime_matches_headers);
	return test_summary();
}
