/*
 * notify-listen PATH: a service manager's notification socket for the
 * tests (systemd's sd_notify protocol: one datagram per notification on
 * an AF_UNIX datagram socket named by NOTIFY_SOCKET). Binds PATH, then
 * prints each datagram received as one line on stdout (its own newlines,
 * between the NAME=VALUE fields, turned into "|"), flushed at once; runs
 * until killed.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2 ||
	    strlen(argv[1]) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		fprintf(stderr,
		        "usage: notify-listen PATH (under 108 bytes)\n");
		return 2;
	}
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	struct sockaddr_un a;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	strcpy(a.sun_path, argv[1]);
	unlink(argv[1]);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("notify-listen: bind");
		return 1;
	}
	char buf[4096];
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n < 0)
			continue;
		buf[n] = '\0';
		while (n > 0 && buf[n - 1] == '\n')
			buf[--n] = '\0';
		for (char *p = buf; *p; p++)
			if (*p == '\n')
				*p = '|';
		printf("%s\n", buf);
		fflush(stdout);
	}
}
