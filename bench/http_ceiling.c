/*
 * bench/http's ceiling: a bare libmicrohttpd responder with the http://
 * source's threading (one internal thread, epoll or poll), reading each
 * POST body and answering 200 with a small JSON body, no database work.
 *   http_ceiling PORT     (0: a free one; prints "port N" and serves
 *                          until SIGTERM/SIGINT)
 */
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *data,
                                  size_t *size, void **con_cls)
{
	static const char body[] = "{\"key\":\"k\",\"outcome\":\"applied\"}";
	(void)cls;
	(void)url;
	(void)method;
	(void)version;
	(void)data;
	if (!*con_cls) {
		*con_cls = conn; /* the headers: wait for the body */
		return MHD_YES;
	}
	if (*size) {
		*size = 0; /* read and dropped */
		return MHD_YES;
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(
	    sizeof(body) - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
	MHD_add_response_header(r, "Content-Type", "application/json");
	enum MHD_Result rc = MHD_queue_response(conn, 200, r);
	MHD_destroy_response(r);
	return rc;
}

int main(int argc, char **argv)
{
	int port = argc > 1 ? atoi(argv[1]) : 0;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	struct MHD_Daemon *d = MHD_start_daemon(
	    MHD_USE_AUTO_INTERNAL_THREAD, (uint16_t)port, NULL, NULL,
	    on_request, NULL, MHD_OPTION_CONNECTION_LIMIT, 1024u,
	    MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "http_ceiling: cannot listen\n");
		return 1;
	}
	const union MHD_DaemonInfo *di =
	    MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	printf("port %u\n", di ? di->port : (unsigned)port);
	fflush(stdout);
	while (!stop)
		pause();
	MHD_stop_daemon(d);
	return 0;
}
