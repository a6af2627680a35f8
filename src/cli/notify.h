/*
 * The service manager's side of `inbox run` (systemd's sd_notify protocol,
 * through libsystemd): READY=1 once every consumer runs, STOPPING=1 when
 * a drain begins, WATCHDOG=1 from the supervising loop when the unit asks
 * for a watchdog (WATCHDOG_USEC), STATUS= lines for `systemctl status`.
 * Without NOTIFY_SOCKET in the environment (no systemd, a terminal,
 * Kubernetes) every call does nothing.
 *
 * Called from the main thread only (cli_notify_status also from the
 * thread waiting for a store at start-up, which is the main thread).
 */
#ifndef INBOX_CLI_NOTIFY_H
#define INBOX_CLI_NOTIFY_H

/* Read WATCHDOG_USEC (and WATCHDOG_PID) once. */
void cli_notify_init(void);
/* READY=1 with a STATUS= line. */
void cli_notify_ready(const char *status);
/* STOPPING=1 with a STATUS= line. */
void cli_notify_stopping(const char *status);
/* A STATUS= line alone (printf-style, cut at 256 bytes). */
void cli_notify_status(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* WATCHDOG=1 when the watchdog is on and half its interval has passed
 * since the last one: call it often (the supervising loop, every 50 ms). */
void cli_notify_watchdog(void);

#endif
