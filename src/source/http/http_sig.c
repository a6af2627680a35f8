/*
 * HTTP source: webhook signatures, checked before anything is recorded.
 *
 *   standard  webhook-signature: "v1,BASE64 v1,BASE64..." over
 *             "ID.TIMESTAMP.BODY", HMAC-SHA256 with the base64-decoded
 *             whsec_ secret; webhook-timestamp within the tolerance.
 *   github    X-Hub-Signature-256: "sha256=HEX" over the body.
 *   stripe    Stripe-Signature: "t=TS,v1=HEX[,v1=HEX...]" over "TS.BODY";
 *             TS within the tolerance.
 * Every configured secret is tried (rotation: old and new at once), every
 * signature of the header too; the comparison is constant-time
 * (CRYPTO_memcmp) over the 32 bytes of the MAC.
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/url.h"
#include "source/http/http.h"

#define MAC_LEN 32

static int b64val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

long inbox__http_b64_decode(unsigned char *out, const char *s, size_t n)
{
	while (n > 0 && s[n - 1] == '=')
		n--;
	if (n % 4 == 1)
		return -1;
	unsigned acc = 0;
	int bits = 0;
	long o = 0;
	for (size_t i = 0; i < n; i++) {
		int v = b64val((unsigned char)s[i]);
		if (v < 0)
			return -1;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	return o;
}

/* MAC_LEN bytes of hex at s (exactly 2 * MAC_LEN digits). 0 or -1. */
static int hex_mac(unsigned char *out, const char *s, size_t n)
{
	if (n != 2 * MAC_LEN)
		return -1;
	for (size_t i = 0; i < MAC_LEN; i++) {
		int a = inbox__hexval((unsigned char)s[2 * i]);
		int b = inbox__hexval((unsigned char)s[2 * i + 1]);
		if (a < 0 || b < 0)
			return -1;
		out[i] = (unsigned char)(a << 4 | b);
	}
	return 0;
}

/* HMAC-SHA256 of prefix + body under each secret into macs[i]. */
static int macs_of(const http_conf *c, const char *prefix, const char *body,
                   size_t n, unsigned char (*macs)[MAC_LEN])
{
	size_t pn = strlen(prefix);
	unsigned char *msg = malloc(pn + n + 1);
	if (!msg)
		return -1;
	memcpy(msg, prefix, pn);
	if (n)
		memcpy(msg + pn, body, n);
	for (size_t i = 0; i < c->nsecrets; i++) {
		unsigned len = MAC_LEN;
		if (!HMAC(EVP_sha256(), c->secrets[i].p, (int)c->secrets[i].n,
		          msg, pn + n, macs[i], &len)) {
			free(msg);
			return -1;
		}
	}
	free(msg);
	return 0;
}

/* 1 if sig matches the MAC under any secret. Constant-time per pair. */
static int any_match(const http_conf *c, unsigned char (*macs)[MAC_LEN],
                     const unsigned char *sig)
{
	int ok = 0;
	for (size_t i = 0; i < c->nsecrets; i++)
		ok |= CRYPTO_memcmp(macs[i], sig, MAC_LEN) == 0;
	return ok;
}

/* A timestamp in seconds, all digits. 0 or -1. */
static int seconds(const char *s, size_t n, int64_t *out)
{
	int64_t v = 0;
	if (n == 0 || n > 12)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

static int in_tolerance(const http_conf *c, int64_t ts_s, int64_t now_ms)
{
	int64_t d = now_ms - ts_s * 1000;
	return d <= c->tolerance_ms && -d <= c->tolerance_ms;
}

static int verify_standard(const http_conf *c, http_hdr_fn hdr, void *pl,
                           const char *body, size_t n, int64_t now_ms,
                           unsigned char (*macs)[MAC_LEN], const char **why)
{
	const char *id = hdr(pl, "webhook-id");
	const char *ts = hdr(pl, "webhook-timestamp");
	const char *sigs = hdr(pl, "webhook-signature");
	int64_t t;
	if (!id || !*id || !ts || !sigs) {
		*why = "missing webhook-id, webhook-timestamp or "
		       "webhook-signature";
		return 0;
	}
	if (seconds(ts, strlen(ts), &t) < 0 || !in_tolerance(c, t, now_ms)) {
		*why = "webhook-timestamp outside the tolerance";
		return 0;
	}
	size_t pn = strlen(id) + strlen(ts) + 3;
	char *prefix = malloc(pn);
	if (!prefix)
		return -1;
	snprintf(prefix, pn, "%s.%s.", id, ts);
	int rc = macs_of(c, prefix, body, n, macs);
	free(prefix);
	if (rc < 0)
		return -1;
	*why = "no signature matches";
	for (const char *p = sigs; *p;) {
		size_t len = strcspn(p, " ");
		unsigned char sig[64];
		if (len > 3 && len < 3 + 90 && memcmp(p, "v1,", 3) == 0 &&
		    inbox__http_b64_decode(sig, p + 3, len - 3) == MAC_LEN &&
		    any_match(c, macs, sig))
			return 1;
		p += len;
		while (*p == ' ')
			p++;
	}
	return 0;
}

static int verify_github(const http_conf *c, http_hdr_fn hdr, void *pl,
                         const char *body, size_t n,
                         unsigned char (*macs)[MAC_LEN], const char **why)
{
	const char *sig = hdr(pl, "X-Hub-Signature-256");
	const char *id = hdr(pl, "X-GitHub-Delivery");
	unsigned char want[MAC_LEN];
	if (!id || !*id || !sig) {
		*why = "missing X-GitHub-Delivery or X-Hub-Signature-256";
		return 0;
	}
	if (strncmp(sig, "sha256=", 7) != 0 ||
	    hex_mac(want, sig + 7, strlen(sig + 7)) < 0) {
		*why = "X-Hub-Signature-256 is not sha256=HEX";
		return 0;
	}
	if (macs_of(c, "", body, n, macs) < 0)
		return -1;
	*why = "no signature matches";
	return any_match(c, macs, want);
}

static int verify_stripe(const http_conf *c, http_hdr_fn hdr, void *pl,
                         const char *body, size_t n, int64_t now_ms,
                         unsigned char (*macs)[MAC_LEN], const char **why)
{
	const char *h = hdr(pl, "Stripe-Signature");
	const char *ts = NULL;
	size_t tsn = 0;
	int64_t t;
	if (!h) {
		*why = "missing Stripe-Signature";
		return 0;
	}
	for (const char *p = h; *p; p += *p == ',') {
		size_t len = strcspn(p, ",");
		if (len > 2 && p[0] == 't' && p[1] == '=') {
			ts = p + 2;
			tsn = len - 2;
		}
		p += len;
	}
	if (!ts || seconds(ts, tsn, &t) < 0 || !in_tolerance(c, t, now_ms)) {
		*why = "Stripe-Signature timestamp missing or outside the "
		       "tolerance";
		return 0;
	}
	char prefix[32];
	snprintf(prefix, sizeof(prefix), "%.*s.", (int)tsn, ts);
	if (macs_of(c, prefix, body, n, macs) < 0)
		return -1;
	*why = "no signature matches";
	for (const char *p = h; *p; p += *p == ',') {
		size_t len = strcspn(p, ",");
		unsigned char sig[MAC_LEN];
		if (len > 3 && memcmp(p, "v1=", 3) == 0 &&
		    hex_mac(sig, p + 3, len - 3) == 0 &&
		    any_match(c, macs, sig))
			return 1;
		p += len;
	}
	return 0;
}

int inbox__http_verify(const http_conf *c, http_hdr_fn hdr, void *payload,
                       const char *body, size_t n, int64_t now_ms,
                       const char **why)
{
	unsigned char(*macs)[MAC_LEN] = calloc(c->nsecrets + 1, MAC_LEN);
	int rc;
	if (!macs)
		return -1;
	*why = "";
	switch (c->mode) {
	case HTTP_MODE_STANDARD:
		rc = verify_standard(c, hdr, payload, body, n, now_ms, macs,
		                     why);
		break;
	case HTTP_MODE_GITHUB:
		rc = verify_github(c, hdr, payload, body, n, macs, why);
		break;
	case HTTP_MODE_STRIPE:
		rc = verify_stripe(c, hdr, payload, body, n, now_ms, macs, why);
		break;
	default:
		rc = 1;
	}
	OPENSSL_cleanse(macs, (c->nsecrets + 1) * MAC_LEN);
	free(macs);
	return rc;
}
