/*
 * kafka-sasl-relay: SASL/PLAIN authentication in front of a Kafka broker
 * that has none (librdkafka's mock cluster: rdkafka_mock_handlers.c
 * answers neither SaslHandshake nor SaslAuthenticate, 2.0.2 and later),
 * for tests only.
 *
 *   kafka-sasl-relay LISTEN_PATH HOST PORT USER PASSWORD
 *
 * Listens on the unix socket LISTEN_PATH (a test puts a TCP or TLS
 * listener in front of it: socat) and, for each connection, connects to
 * HOST:PORT and speaks the broker's side of the authentication itself:
 *   - ApiVersions (18): forwarded; the broker's answer gets SaslHandshake
 *     (17) v0-1 and SaslAuthenticate (36) v0-1 added to its list;
 *   - SaslHandshake: mechanisms PLAIN and SCRAM-SHA-256 accepted, any
 *     other refused with UNSUPPORTED_SASL_MECHANISM (33); the list
 *     ["PLAIN", "SCRAM-SHA-256"];
 *   - SaslAuthenticate: the PLAIN token (authzid NUL user NUL password),
 *     or the two SCRAM-SHA-256 rounds (RFC 5802/7677: a random salt and
 *     nonce, 4096 iterations; the client's proof checked, the server's
 *     signature sent), checked against USER and PASSWORD:
 *     SASL_AUTHENTICATION_FAILED (58) and the connection closed when they
 *     differ, as a broker does;
 *   - any other request before a successful SaslAuthenticate closes the
 *     connection (an unauthenticated client gets nothing from the broker).
 * Once authenticated the bytes are relayed both ways unchanged.
 *
 * One line per authentication on stderr (flushed), never the password:
 *   auth ok user=USER mechanism=MECHANISM
 *   auth failed user=USER mechanism=MECHANISM
 * and "listening PATH" once ready. Exit status 2 on bad arguments, 1 if
 * it cannot listen; runs until killed (SIGTERM). One process per
 * connection (fork).
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#define MAX_FRAME (64 * 1024 * 1024)

static const char *want_user, *want_pass;

static int read_full(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static int16_t get16(const unsigned char *p)
{
	return (int16_t)((uint16_t)p[0] << 8 | p[1]);
}

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static void put16(unsigned char *p, int v)
{
	p[0] = (unsigned char)((unsigned)v >> 8);
	p[1] = (unsigned char)v;
}

/* One frame (its 4-byte length excluded) into a malloc'ed *out. */
static int read_frame(int fd, unsigned char **out, size_t *len)
{
	unsigned char h[4];
	if (read_full(fd, h, 4) < 0)
		return -1;
	uint32_t n = get32(h);
	if (n < 8 || n > MAX_FRAME)
		return -1;
	*out = malloc(n);
	if (!*out || read_full(fd, *out, n) < 0)
		return -1;
	*len = n;
	return 0;
}

static int send_frame(int fd, const unsigned char *body, size_t len)
{
	unsigned char h[4];
	put32(h, (uint32_t)len);
	return write_full(fd, h, 4) < 0 ? -1 : write_full(fd, body, len);
}

static int get_uvarint(const unsigned char *p, size_t n, size_t *at,
                       uint64_t *v)
{
	*v = 0;
	for (int shift = 0; *at < n && shift < 64; shift += 7) {
		unsigned char b = p[(*at)++];
		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
	}
	return -1;
}

static size_t put_uvarint(unsigned char *p, uint64_t v)
{
	size_t n = 0;
	do {
		unsigned char b = v & 0x7f;
		v >>= 7;
		p[n++] = (unsigned char)(b | (v ? 0x80 : 0));
	} while (v);
	return n;
}

/* The broker's ApiVersions answer (frame body r, n bytes) to a request of
 * version `ver`, with SaslHandshake and SaslAuthenticate v0-1 added, into
 * out (n + 32 bytes). Returns its length, or 0 to pass r on unchanged (an
 * error answer, or one it cannot read). */
static size_t add_sasl_apis(const unsigned char *r, size_t n, int ver,
                            unsigned char *out)
{
	/* correlation id (4), error code (2), then the list */
	if (n < 10 || get16(r + 4) != 0)
		return 0;
	static const int add[2][3] = {{17, 0, 1}, {36, 0, 1}};
	size_t at = 6, o = 0;
	memcpy(out, r, 6);
	o = 6;
	if (ver >= 3) {
		uint64_t cnt;
		if (get_uvarint(r, n, &at, &cnt) < 0 || cnt == 0)
			return 0;
		size_t start = at;
		for (uint64_t i = 0; i + 1 < cnt; i++) {
			uint64_t tags, t, sz;
			at += 6;
			if (at > n || get_uvarint(r, n, &at, &tags) < 0)
				return 0;
			for (uint64_t k = 0; k < tags; k++) {
				if (get_uvarint(r, n, &at, &t) < 0 ||
				    get_uvarint(r, n, &at, &sz) < 0 ||
				    (at += sz) > n)
					return 0;
			}
		}
		o += put_uvarint(out + o, cnt + 2);
		memcpy(out + o, r + start, at - start);
		o += at - start;
		for (int i = 0; i < 2; i++) {
			put16(out + o, add[i][0]);
			put16(out + o + 2, add[i][1]);
			put16(out + o + 4, add[i][2]);
			out[o + 6] = 0; /* no tagged fields */
			o += 7;
		}
	} else {
		if (n < 10)
			return 0;
		uint32_t cnt = get32(r + 6);
		at = 10 + (size_t)cnt * 6;
		if (at > n)
			return 0;
		put32(out + o, cnt + 2);
		memcpy(out + o + 4, r + 10, at - 10);
		o += 4 + (at - 10);
		for (int i = 0; i < 2; i++) {
			put16(out + o, add[i][0]);
			put16(out + o + 2, add[i][1]);
			put16(out + o + 4, add[i][2]);
			o += 6;
		}
	}
	memcpy(out + o, r + at, n - at); /* throttle time, tagged fields */
	return o + (n - at);
}

/* Where the request body starts: after the v1 header (api key, version,
 * correlation id, client id). SaslHandshake and SaslAuthenticate v0-1
 * are not flexible: no tagged fields. */
static size_t body_at(const unsigned char *q, size_t n)
{
	if (n < 10)
		return 0;
	int16_t cl = get16(q + 8);
	size_t at = 10 + (cl > 0 ? (size_t)cl : 0);
	return at <= n ? at : 0;
}

enum { MECH_NONE, MECH_PLAIN, MECH_SCRAM };

/* SaslHandshake: *mech set to the mechanism asked for (PLAIN or
 * SCRAM-SHA-256), answered with both; another one is refused. */
static int handshake(int cfd, const unsigned char *q, size_t n, int *mech)
{
	size_t at = body_at(q, n);
	if (!at || at + 2 > n)
		return -1;
	int16_t ml = get16(q + at);
	const char *m = (const char *)q + at + 2;
	*mech = MECH_NONE;
	if (ml > 0 && at + 2 + (size_t)ml <= n) {
		if (ml == 5 && !memcmp(m, "PLAIN", 5))
			*mech = MECH_PLAIN;
		else if (ml == 13 && !memcmp(m, "SCRAM-SHA-256", 13))
			*mech = MECH_SCRAM;
	}
	unsigned char r[4 + 2 + 4 + 2 + 5 + 2 + 13];
	memcpy(r, q + 4, 4); /* correlation id */
	put16(r + 4, *mech ? 0 : 33);
	put32(r + 6, 2);
	put16(r + 10, 5);
	memcpy(r + 12, "PLAIN", 5);
	put16(r + 17, 13);
	memcpy(r + 19, "SCRAM-SHA-256", 13);
	if (send_frame(cfd, r, sizeof(r)) < 0)
		return -1;
	return *mech ? 0 : -1;
}

/* A SaslAuthenticate answer: error (0 or 58, with its message), the
 * server's bytes. */
static int auth_reply(int cfd, const unsigned char *q, int ver, int ok,
                      const char *data, size_t dlen)
{
	static const char msg[] =
	    "Authentication failed: Invalid username or password";
	size_t cap = 4 + 2 + 2 + sizeof(msg) + 4 + dlen + 8, o = 6;
	unsigned char *r = malloc(cap);
	if (!r)
		return -1;
	memcpy(r, q + 4, 4);
	put16(r + 4, ok ? 0 : 58);
	if (ok) {
		put16(r + o, 0xffff); /* error message: null */
		o += 2;
	} else {
		put16(r + o, (int)sizeof(msg) - 1);
		memcpy(r + o + 2, msg, sizeof(msg) - 1);
		o += 2 + sizeof(msg) - 1;
	}
	put32(r + o, (uint32_t)dlen);
	if (dlen)
		memcpy(r + o + 4, data, dlen);
	o += 4 + dlen;
	if (ver >= 1) {
		memset(r + o, 0, 8); /* session lifetime: none */
		o += 8;
	}
	int rc = send_frame(cfd, r, o);
	free(r);
	return rc;
}

static void say(int ok, const char *user, const char *mech)
{
	if (ok)
		fprintf(stderr, "auth ok user=%s mechanism=%s\n", user, mech);
	else
		fprintf(stderr, "auth failed user=%s mechanism=%s\n", user,
		        mech);
	fflush(stderr);
}

/* The SaslAuthenticate token of q (NULL if unreadable). */
static const char *auth_token(const unsigned char *q, size_t n, size_t *tl)
{
	size_t at = body_at(q, n);
	if (!at || at + 4 > n)
		return NULL;
	*tl = get32(q + at);
	if (*tl > n - at - 4)
		return NULL;
	return (const char *)q + at + 4;
}

/* PLAIN: authzid NUL user NUL password. 0 authenticated, -1 not. */
static int auth_plain(int cfd, const unsigned char *q, size_t n, int ver)
{
	size_t tl = 0;
	const char *tok = auth_token(q, n, &tl);
	if (!tok)
		return -1;
	const char *u = memchr(tok, 0, tl);
	const char *p = u ? memchr(u + 1, 0, tl - (size_t)(u + 1 - tok)) : NULL;
	char user[256] = "";
	int ok = 0;
	if (u && p) {
		size_t ul = (size_t)(p - (u + 1));
		size_t pl = tl - (size_t)(p + 1 - tok);
		snprintf(user, sizeof(user), "%.*s", (int)ul, u + 1);
		ok = strlen(want_user) == ul && !memcmp(u + 1, want_user, ul) &&
		     strlen(want_pass) == pl && !memcmp(p + 1, want_pass, pl);
	}
	say(ok, user, "PLAIN");
	if (auth_reply(cfd, q, ver, ok, NULL, 0) < 0)
		return -1;
	return ok ? 0 : -1;
}

/* SCRAM-SHA-256 (RFC 5802/7677), the server's side, in two rounds. */
typedef struct scram {
	int round; /* 0: client-first expected, 1: client-final */
	char user[256];
	char first_bare[512];
	char server_first[512];
	char nonce[256];
	unsigned char salt[16];
} scram;

#define SCRAM_ITER 4096

static void hmac256(const unsigned char *key, size_t klen, const void *d,
                    size_t dlen, unsigned char out[32])
{
	unsigned int ol = 32;
	HMAC(EVP_sha256(), key, (int)klen, d, dlen, out, &ol);
}

static int auth_scram(int cfd, const unsigned char *q, size_t n, int ver,
                      scram *sc)
{
	size_t tl = 0;
	const char *tok = auth_token(q, n, &tl);
	if (!tok || tl >= 1024)
		return -1;
	char t[1024];
	memcpy(t, tok, tl);
	t[tl] = '\0';
	if (sc->round == 0) {
		/* gs2 header "n,," (no channel binding), then n=USER,r=NONCE */
		const char *bare = strstr(t, ",,");
		if (strncmp(t, "n,", 2) || !bare)
			return -1;
		bare += 2;
		const char *r = strstr(bare, ",r=");
		if (strncmp(bare, "n=", 2) || !r)
			return -1;
		snprintf(sc->user, sizeof(sc->user), "%.*s",
		         (int)(r - bare - 2), bare + 2);
		snprintf(sc->first_bare, sizeof(sc->first_bare), "%s", bare);
		unsigned char rnd[18];
		char srv[32], salt64[32];
		RAND_bytes(rnd, sizeof(rnd));
		RAND_bytes(sc->salt, sizeof(sc->salt));
		EVP_EncodeBlock((unsigned char *)srv, rnd, sizeof(rnd));
		EVP_EncodeBlock((unsigned char *)salt64, sc->salt,
		                sizeof(sc->salt));
		snprintf(sc->nonce, sizeof(sc->nonce), "%s%s", r + 3, srv);
		snprintf(sc->server_first, sizeof(sc->server_first),
		         "r=%s,s=%s,i=%d", sc->nonce, salt64, SCRAM_ITER);
		sc->round = 1;
		return auth_reply(cfd, q, ver, 1, sc->server_first,
		                  strlen(sc->server_first)) < 0
		           ? -1
		           : 1; /* one more round */
	}
	/* c=biws,r=NONCE,p=PROOF */
	char *p = strstr(t, ",p=");
	char *r = strstr(t, ",r=");
	/* The nonce must end with the server's: librdkafka 2.0.2 sends its
	 * own nonce again in front of it, and Kafka's ScramSaslServer
	 * accepts that (endsWith); the proof covers what was sent. */
	size_t nl = strlen(sc->nonce);
	int ok = p && r && r < p && !strcmp(sc->user, want_user) &&
	         (size_t)(p - r - 3) >= nl && !strncmp(p - nl, sc->nonce, nl);
	unsigned char salted[32], ckey[32], skey[32], stored[32], csig[32],
	    ssig[32], proof[48];
	char auth[1600], v[64] = "v=";
	if (ok) {
		*p = '\0';
		snprintf(auth, sizeof(auth), "%s,%s,%s", sc->first_bare,
		         sc->server_first, t);
		PKCS5_PBKDF2_HMAC(want_pass, (int)strlen(want_pass), sc->salt,
		                  sizeof(sc->salt), SCRAM_ITER, EVP_sha256(),
		                  32, salted);
		hmac256(salted, 32, "Client Key", 10, ckey);
		SHA256(ckey, 32, stored);
		hmac256(stored, 32, auth, strlen(auth), csig);
		int pl = EVP_DecodeBlock(proof, (unsigned char *)p + 3,
		                         (int)strlen(p + 3));
		/* the decoded length counts the padding's zero bytes */
		ok = pl >= 32;
		for (int i = 0; ok && i < 32; i++)
			ckey[i] = proof[i] ^ csig[i];
		unsigned char h[32];
		SHA256(ckey, 32, h);
		ok = ok && !memcmp(h, stored, 32);
		hmac256(salted, 32, "Server Key", 10, skey);
		hmac256(skey, 32, auth, strlen(auth), ssig);
		EVP_EncodeBlock((unsigned char *)v + 2, ssig, 32);
	}
	say(ok, sc->user, "SCRAM-SHA-256");
	if (auth_reply(cfd, q, ver, ok, ok ? v : NULL, ok ? strlen(v) : 0) < 0)
		return -1;
	return ok ? 0 : -1;
}

static int connect_upstream(const char *host, const char *port)
{
	struct addrinfo hints = {0}, *ai;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		return -1;
	int fd = -1;
	for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
		if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	return fd;
}

static void pump(int a, int b)
{
	char buf[65536];
	struct pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (int i = 0; i < 2; i++) {
			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t r = read(p[i].fd, buf, sizeof(buf));
			if (r <= 0 ||
			    write_full(p[1 - i].fd, buf, (size_t)r) < 0)
				return;
		}
	}
}

static void serve(int cfd, const char *host, const char *port)
{
	int ufd = connect_upstream(host, port);
	if (ufd < 0)
		return;
	int mech = MECH_NONE;
	scram sc = {0};
	for (;;) {
		unsigned char *q = NULL, *r = NULL;
		size_t n = 0, rn = 0;
		if (read_frame(cfd, &q, &n) < 0)
			return;
		int key = get16(q), ver = get16(q + 2), rc = -1;
		if (key == 18) {
			unsigned char *out = NULL;
			if (send_frame(ufd, q, n) == 0 &&
			    read_frame(ufd, &r, &rn) == 0 &&
			    (out = malloc(rn + 32)) != NULL) {
				size_t on = add_sasl_apis(r, rn, ver, out);
				rc = on ? send_frame(cfd, out, on)
				        : send_frame(cfd, r, rn);
			}
			free(out);
		} else if (key == 17) {
			rc = handshake(cfd, q, n, &mech);
		} else if (key == 36 && mech != MECH_NONE) {
			rc = mech == MECH_PLAIN
			         ? auth_plain(cfd, q, n, ver)
			         : auth_scram(cfd, q, n, ver, &sc);
			if (rc == 1) {
				rc = 0; /* SCRAM: the client's final message
				           next */
			} else if (rc == 0) {
				free(q);
				pump(cfd, ufd);
				return;
			}
		} else {
			fprintf(stderr,
			        "refused: request %d before "
			        "authentication\n",
			        key);
			fflush(stderr);
		}
		free(q);
		free(r);
		if (rc < 0)
			return;
	}
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: kafka-sasl-relay LISTEN_PATH HOST PORT "
		                "USER PASSWORD\n");
		return 2;
	}
	want_user = argv[4];
	want_pass = argv[5];
	signal(SIGCHLD, SIG_IGN); /* children reaped by the kernel */
	signal(SIGPIPE, SIG_IGN);
	struct sockaddr_un sa = {0};
	sa.sun_family = AF_UNIX;
	if (strlen(argv[1]) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "kafka-sasl-relay: path too long\n");
		return 2;
	}
	strcpy(sa.sun_path, argv[1]);
	unlink(argv[1]);
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(lfd, 64) < 0) {
		perror("kafka-sasl-relay: listen");
		return 1;
	}
	fprintf(stderr, "listening %s\n", argv[1]);
	fflush(stderr);
	for (;;) {
		int cfd = accept(lfd, NULL, NULL);
		if (cfd < 0) {
			if (errno == EINTR)
				continue;
			perror("kafka-sasl-relay: accept");
			return 1;
		}
		pid_t pid = fork();
		if (pid == 0) {
			close(lfd);
			serve(cfd, argv[2], argv[3]);
			_exit(0);
		}
		close(cfd);
	}
}
