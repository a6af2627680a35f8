/* sd_notify for `inbox run` (cli/notify.h). */
#include "cli/notify.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>

#include "base/util.h"

static double g_wd_every; /* seconds between pings; 0 = no watchdog */
static double g_wd_last;

void cli_notify_init(void)
{
	uint64_t usec = 0;
	/* > 0 only when WATCHDOG_USEC is set (and WATCHDOG_PID, if set, is
	 * this process); the environment is left as it is. */
	if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
		g_wd_every = (double)usec / 1e6 / 2.0;
	g_wd_last = 0;
}

static void notify(const char *state, const char *status)
{
	char msg[320];
	snprintf(msg, sizeof(msg), "%s%sSTATUS=%s", state ? state : "",
	         state ? "\n" : "", status ? status : "");
	/* 0 without NOTIFY_SOCKET: nothing is sent. */
	(void)sd_notify(0, msg);
}

void cli_notify_ready(const char *status)
{
	notify("READY=1", status);
}

void cli_notify_stopping(const char *status)
{
	notify("STOPPING=1", status);
}

void cli_notify_status(const char *fmt, ...)
{
	char status[257];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(status, sizeof(status), fmt, ap);
	va_end(ap);
	for (char *p = status; *p; p++)
		if (*p == '\n')
			*p = ' '; /* one line: a newline would start a field */
	notify(NULL, status);
}

void cli_notify_watchdog(void)
{
	if (g_wd_every <= 0)
		return;
	double now = inbox__mono_seconds();
	if (g_wd_last > 0 && now - g_wd_last < g_wd_every)
		return;
	g_wd_last = now;
	(void)sd_notify(0, "WATCHDOG=1");
}
