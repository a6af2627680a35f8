/* Progress lines on a terminal and safe printing of stored text. */
#include "cli/progress.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/json.h"
#include "cli/cli.h"
#include "core/internal.h"

void cli_progress_init(cli_progress *p)
{
	memset(p, 0, sizeof(*p));
	p->tty = isatty(2);
}

void cli_progress_show(cli_progress *p, const char *label, int64_t done,
                       int64_t total, int force)
{
	if (!p->tty)
		return;
	double now = inbox__mono_seconds();
	if (!force && p->shown > 0 && now - p->shown < 0.1)
		return;
	/* A store may report its last figures more than once (PostgreSQL's
	 * purge, once per pass over the generations): one line for them. */
	if (p->open && done == p->done && total == p->total)
		return;
	p->shown = now;
	p->done = done;
	p->total = total;
	if (total > 0)
		fprintf(stderr, "\r%s %lld/%lld (%d%%)\033[K", label,
		        (long long)done, (long long)total,
		        (int)(done >= total ? 100 : done * 100 / total));
	else
		fprintf(stderr, "\r%s %lld\033[K", label, (long long)done);
	fflush(stderr);
	p->open = 1;
}

void cli_progress_end(cli_progress *p)
{
	if (p->tty && p->open)
		fputc('\n', stderr);
	p->open = 0;
}

void cli_print_safe(FILE *f, const char *s, size_t len, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t shown = 0;
	if (!s) {
		fputs("-", f);
		return;
	}
	while (len > 0) {
		if (max && shown >= max) {
			fputs("...", f);
			return;
		}
		size_t l = inbox__utf8_seq_len(p, len);
		if (l == 0 || *p == 0x7f) {
			fprintf(f, "\\x%02x", *p);
			l = 1;
		} else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p == '\r')
			fputs("\\r", f);
		else if (*p < 0x20)
			fprintf(f, "\\x%02x", *p);
		else
			fwrite(p, 1, l, f);
		p += l;
		len -= l;
		shown += l;
	}
}

void cli_json_string(FILE *f, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	while (len > 0) {
		size_t l = inbox__utf8_seq_len(p, len);
		if (l == 0) {
			fputs("\\ufffd", f);
			l = 1;
		} else if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fwrite(p, 1, l, f);
		p += l;
		len -= l;
	}
	fputc('"', f);
}

const char *cli_time_text(int64_t ms, char *buf, size_t len)
{
	if (ms <= 0) {
		snprintf(buf, len, "-");
		return buf;
	}
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
	         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	         tm.tm_min, tm.tm_sec, (int)(ms % 1000));
	return buf;
}

const char *cli_age_text(int64_t ms, char *buf, size_t len)
{
	/* Two units, never rounded down to the bigger one: 2d23h, not 2d
	 * (a retention headroom of 2d23h read as 2d is a day wrong). */
	static const struct {
		int64_t s;
		char unit;
	} u[] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}};
	int64_t s = (ms < 0 ? -ms : ms) / 1000;
	const char *sign = ms < 0 ? "-" : "";
	size_t i = 0;
	while (i < 3 && s < u[i].s)
		i++;
	long long big = (long long)(s / u[i].s);
	long long small = i < 3 ? (long long)(s % u[i].s / u[i + 1].s) : 0;
	if (small)
		snprintf(buf, len, "%s%lld%c%lld%c", sign, big, u[i].unit,
		         small, u[i + 1].unit);
	else
		snprintf(buf, len, "%s%lld%c", sign, big, u[i].unit);
	return buf;
}
