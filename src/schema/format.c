/*
 * "format": the formats we assert. Draft 7 makes format an annotation by
 * default; a consumer that names a format wants it checked, so we check
 * the ones below and refuse the others at compile time.
 */
#include <arpa/inet.h>
#include <string.h>

#include "base/json.h"
#include "schema/node.h"

static const struct {
	const char *name;
	sch_format f;
} FORMATS[] = {
    {"date-time", SCH_FMT_DATE_TIME},
    {"date", SCH_FMT_DATE},
    {"time", SCH_FMT_TIME},
    {"email", SCH_FMT_EMAIL},
    {"hostname", SCH_FMT_HOSTNAME},
    {"ipv4", SCH_FMT_IPV4},
    {"ipv6", SCH_FMT_IPV6},
    {"uri", SCH_FMT_URI},
    {"uri-reference", SCH_FMT_URI_REFERENCE},
    {"uuid", SCH_FMT_UUID},
    {"json-pointer", SCH_FMT_JSON_POINTER},
    {"relative-json-pointer", SCH_FMT_RELATIVE_JSON_POINTER},
    {"regex", SCH_FMT_REGEX},
};

sch_format sch__format_lookup(const char *name)
{
	for (size_t i = 0; i < sizeof(FORMATS) / sizeof(FORMATS[0]); i++)
		if (strcmp(FORMATS[i].name, name) == 0)
			return FORMATS[i].f;
	return SCH_FMT_NONE;
}

const char *sch__format_name(sch_format f)
{
	for (size_t i = 0; i < sizeof(FORMATS) / sizeof(FORMATS[0]); i++)
		if (FORMATS[i].f == f)
			return FORMATS[i].name;
	return "?";
}

/* ---- RFC 3339 ------------------------------------------------------- */

static int digits(const char *s, size_t n, int *v)
{
	*v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		*v = *v * 10 + (s[i] - '0');
	}
	return 1;
}

/* full-date = YYYY-MM-DD, exactly 10 bytes, a real calendar day */
static int full_date(const char *s, size_t len)
{
	static const int days[] = {31, 28, 31, 30, 31, 30,
	                           31, 31, 30, 31, 30, 31};
	int y, m, d;
	if (len != 10 || s[4] != '-' || s[7] != '-' || !digits(s, 4, &y) ||
	    !digits(s + 5, 2, &m) || !digits(s + 8, 2, &d))
		return 0;
	if (m < 1 || m > 12 || d < 1)
		return 0;
	int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	return d <= days[m - 1] + (m == 2 && leap);
}

/* full-time = HH:MM:SS[.frac](Z|+HH:MM|-HH:MM); Z is case-insensitive */
static int full_time(const char *s, size_t len)
{
	int h, m, sec;
	if (len < 9 || s[2] != ':' || s[5] != ':' || !digits(s, 2, &h) ||
	    !digits(s + 3, 2, &m) || !digits(s + 6, 2, &sec))
		return 0;
	if (h > 23 || m > 59 || sec > 60) /* 60: a leap second */
		return 0;
	size_t i = 8;
	if (i < len && s[i] == '.') {
		size_t start = ++i;
		while (i < len && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == start)
			return 0;
	}
	if (i == len)
		return 0; /* RFC 3339 requires the offset */
	if ((s[i] == 'Z' || s[i] == 'z') && i + 1 == len)
		return 1;
	int oh, om;
	if ((s[i] != '+' && s[i] != '-') || len - i != 6 || s[i + 3] != ':' ||
	    !digits(s + i + 1, 2, &oh) || !digits(s + i + 4, 2, &om))
		return 0;
	return oh <= 23 && om <= 59;
}

static int date_time(const char *s, size_t len)
{
	return len > 11 && (s[10] == 'T' || s[10] == 't') && full_date(s, 10) &&
	       full_time(s + 11, len - 11);
}

/* ---- names and addresses -------------------------------------------- */

static int is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9');
}

static int is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
	       (c >= 'A' && c <= 'F');
}

/* RFC 1123 host name: labels of letters, digits and inner hyphens, 1-63
 * bytes each, 253 in all. */
static int hostname(const char *s, size_t len)
{
	if (len == 0 || len > 253)
		return 0;
	size_t label = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i == len || s[i] == '.') {
			if (label == 0 || label > 63 || s[i - 1] == '-')
				return 0;
			label = 0;
			continue;
		}
		if (!is_alnum(s[i]) && !(s[i] == '-' && label > 0))
			return 0;
		label++;
	}
	return 1;
}

static int ip_literal(const char *s, size_t len, int family)
{
	char buf[64];
	unsigned char addr[16];
	if (len == 0 || len >= sizeof(buf) || memchr(s, '\0', len))
		return 0;
	memcpy(buf, s, len);
	buf[len] = '\0';
	/* glibc's inet_pton: dotted quad only (no "127.1", no 0x, no
	 * leading zeros) for IPv4; RFC 4291 text forms for IPv6. */
	return inet_pton(family, buf, addr) == 1;
}

/* A simple address: dot-atom local part, '@', a host name or an address
 * literal ([192.0.2.1], [IPv6:...]). Quoted local parts are refused. */
static int email(const char *s, size_t len)
{
	const char *at = memchr(s, '@', len);
	if (!at)
		return 0;
	size_t local = (size_t)(at - s);
	if (local == 0 || local > 64 || s[0] == '.' || s[local - 1] == '.')
		return 0;
	for (size_t i = 0; i < local; i++) {
		char c = s[i];
		if (c == '.' && s[i + 1] == '.')
			return 0;
		if (!is_alnum(c) && !strchr(".!#$%&'*+/=?^_`{|}~-", c))
			return 0;
	}
	const char *d = at + 1;
	size_t dlen = len - local - 1;
	if (dlen >= 2 && d[0] == '[' && d[dlen - 1] == ']') {
		if (dlen > 7 && strncmp(d + 1, "IPv6:", 5) == 0)
			return ip_literal(d + 6, dlen - 7, AF_INET6);
		return ip_literal(d + 1, dlen - 2, AF_INET);
	}
	return hostname(d, dlen);
}

static int uuid(const char *s, size_t len)
{
	if (len != 36)
		return 0;
	for (size_t i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return 0;
		} else if (!is_hex(s[i])) {
			return 0;
		}
	}
	return 1;
}

/* ---- RFC 3986 URIs -------------------------------------------------- */

static int unreserved(char c)
{
	return is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

static int sub_delim(char c)
{
	return c && strchr("!$&'()*+,;=", c) != NULL;
}

/* Bytes of [s, e) are all allowed by `extra` besides unreserved,
 * sub-delims and percent escapes. */
static int chars_ok(const char *s, const char *e, const char *extra)
{
	while (s < e) {
		if (*s == '%') {
			if (e - s < 3 || !is_hex(s[1]) || !is_hex(s[2]))
				return 0;
			s += 3;
			continue;
		}
		if (!unreserved(*s) && !sub_delim(*s) && !strchr(extra, *s))
			return 0;
		s++;
	}
	return 1;
}

static int authority(const char *s, const char *e)
{
	const char *at = NULL;
	for (const char *p = s; p < e; p++)
		if (*p == '@')
			at = p;
	if (at) {
		if (!chars_ok(s, at, ":"))
			return 0;
		s = at + 1;
	}
	const char *host_end = e;
	if (s < e && *s == '[') {
		const char *close = memchr(s, ']', (size_t)(e - s));
		if (!close)
			return 0;
		if (!(close - s > 1 && (s[1] == 'v' || s[1] == 'V')) &&
		    !ip_literal(s + 1, (size_t)(close - s - 1), AF_INET6))
			return 0; /* IPvFuture accepted as is */
		host_end = close + 1;
	} else {
		const char *colon = memchr(s, ':', (size_t)(e - s));
		if (colon)
			host_end = colon;
		if (!chars_ok(s, host_end, ""))
			return 0;
	}
	if (host_end < e) {
		if (*host_end != ':')
			return 0;
		for (const char *p = host_end + 1; p < e; p++)
			if (*p < '0' || *p > '9')
				return 0;
	}
	return 1;
}

/* URI (need_scheme) or URI-reference. */
static int uri(const char *s, size_t len, int need_scheme)
{
	const char *e = s + len, *p = s;
	if (memchr(s, '\0', len))
		return 0;
	/* scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":" */
	const char *q = s;
	if (q < e && ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z'))) {
		while (q < e &&
		       (is_alnum(*q) || *q == '+' || *q == '-' || *q == '.'))
			q++;
		if (q < e && *q == ':')
			p = q + 1;
	}
	if (p == s && need_scheme)
		return 0;
	const char *frag = memchr(p, '#', (size_t)(e - p));
	const char *qry = memchr(p, '?', (size_t)((frag ? frag : e) - p));
	const char *path_end = qry ? qry : frag ? frag : e;
	if (e - p >= 2 && p[0] == '/' && p[1] == '/' && p + 2 <= path_end) {
		const char *a = p + 2;
		const char *slash = memchr(a, '/', (size_t)(path_end - a));
		const char *a_end = slash ? slash : path_end;
		if (!authority(a, a_end))
			return 0;
		p = a_end;
	} else if (p == s) {
		/* relative path: no ':' in its first segment */
		const char *seg = memchr(p, '/', (size_t)(path_end - p));
		if (memchr(p, ':', (size_t)((seg ? seg : path_end) - p)))
			return 0;
	}
	if (!chars_ok(p, path_end, ":@/"))
		return 0;
	if (qry && !chars_ok(qry + 1, frag ? frag : e, ":@/?"))
		return 0;
	if (frag && !chars_ok(frag + 1, e, ":@/?"))
		return 0;
	return 1;
}

/* ---- JSON pointers --------------------------------------------------- */

static int json_pointer(const char *s, size_t len)
{
	if (len && s[0] != '/')
		return 0;
	for (size_t i = 0; i < len; i++)
		if (s[i] == '~' &&
		    (i + 1 >= len || (s[i + 1] != '0' && s[i + 1] != '1')))
			return 0;
	return 1;
}

/* non-negative-integer ( "#" / json-pointer ) */
static int relative_json_pointer(const char *s, size_t len)
{
	size_t i = 0;
	while (i < len && s[i] >= '0' && s[i] <= '9')
		i++;
	if (i == 0 || (s[0] == '0' && i > 1))
		return 0;
	if (i < len && s[i] == '#')
		return i + 1 == len;
	return json_pointer(s + i, len - i);
}

int sch__format_check(sch_format f, const char *s, size_t len)
{
	switch (f) {
	case SCH_FMT_DATE_TIME:
		return date_time(s, len);
	case SCH_FMT_DATE:
		return full_date(s, len);
	case SCH_FMT_TIME:
		return full_time(s, len);
	case SCH_FMT_EMAIL:
		return email(s, len);
	case SCH_FMT_HOSTNAME:
		return hostname(s, len);
	case SCH_FMT_IPV4:
		return ip_literal(s, len, AF_INET);
	case SCH_FMT_IPV6:
		return ip_literal(s, len, AF_INET6);
	case SCH_FMT_URI:
		return uri(s, len, 1);
	case SCH_FMT_URI_REFERENCE:
		return uri(s, len, 0);
	case SCH_FMT_UUID:
		return uuid(s, len);
	case SCH_FMT_JSON_POINTER:
		return json_pointer(s, len);
	case SCH_FMT_RELATIVE_JSON_POINTER:
		return relative_json_pointer(s, len);
	case SCH_FMT_REGEX:
		return sch__regex_valid(s, len);
	default:
		return 1;
	}
}
