/*
 * inbox --version: this command's version, the library's it runs with,
 * the client library of every registered store and source (each backend
 * reports its own through its registration, as the library reports it at
 * run time: inbox_store_client_version, inbox_source_client_version), and
 * the libraries the library and the command use themselves.
 */
#include <curl/curl.h>
#include <inbox/inbox.h>
#include <inbox/sys/source.h>
#include <inbox/sys/store.h>
#include <jansson.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "cli/cli.h"

/* One line per client library, once (two schemes may share one). */
static void backend_line(FILE *f, const char *v, char seen[][96], int *nseen)
{
	if (!v[0])
		return;
	for (int i = 0; i < *nseen; i++)
		if (strcmp(seen[i], v) == 0)
			return;
	if (*nseen < 32)
		snprintf(seen[(*nseen)++], 96, "%s", v);
	fprintf(f, "%s\n", v);
}

void cli_print_version(FILE *f)
{
	char pcre[64] = "";
	if (pcre2_config(PCRE2_CONFIG_VERSION, pcre) < 0)
		snprintf(pcre, sizeof(pcre), "?");
	const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
	fprintf(f, "inbox %s\n", INBOX_VERSION);
	fprintf(f, "libinbox %s\n", inbox_version_string());
	char v[96], seen[32][96];
	int nseen = 0;
	for (size_t i = 0; inbox_store_client_version(i, v, sizeof(v)) >= 0;
	     i++)
		backend_line(f, v, seen, &nseen);
	for (size_t i = 0; inbox_source_client_version(i, v, sizeof(v)) >= 0;
	     i++)
		backend_line(f, v, seen, &nseen);
	fprintf(f, "libcurl %s\n", cv ? cv->version : "?");
	fprintf(f, "jansson %s\n", jansson_version_str());
	fprintf(f, "pcre2 %s\n", pcre);
#ifdef OPENSSL_VERSION_STRING /* OpenSSL 3: "3.0.11" */
	fprintf(f, "openssl %s\n", OpenSSL_version(OPENSSL_VERSION_STRING));
#else
	fprintf(f, "%s\n", OpenSSL_version(OPENSSL_VERSION));
#endif
	fprintf(f, "libyaml %s\n", yaml_get_version_string());
	/* the command's /metrics server; once if the http source named it */
	snprintf(v, sizeof(v), "libmicrohttpd %s", MHD_get_version());
	backend_line(f, v, seen, &nseen);
}
