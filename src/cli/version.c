/*
 * inbox --version: this command's version, the library's it runs with,
 * and the versions of the client libraries loaded with it (as they report
 * themselves at run time, not the headers we were built with; hiredis has
 * no such call, its headers' version is shown).
 */
#include <amqp.h>
#include <curl/curl.h>
#include <hiredis/hiredis.h>
#include <inbox/inbox.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <microhttpd.h>
#include <nats/nats.h>
#include <openssl/crypto.h>
#include <sqlite3.h>
#include <stdio.h>
#include <yaml.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "cli/cli.h"

#define STR_(x) #x
#define STR(x)  STR_(x)

void cli_print_version(FILE *f)
{
	/* PQlibVersion(): major * 10000 + minor from PostgreSQL 10 on. */
	int pq = PQlibVersion();
	char pcre[64] = "";
	if (pcre2_config(PCRE2_CONFIG_VERSION, pcre) < 0)
		snprintf(pcre, sizeof(pcre), "?");
	const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
	fprintf(f, "inbox %s\n", INBOX_VERSION);
	fprintf(f, "libinbox %s\n", inbox_version_string());
	fprintf(f, "libpq %d.%d\n", pq / 10000, pq % 10000);
	fprintf(f, "sqlite %s\n", sqlite3_libversion());
	fprintf(f, "librdkafka %s\n", rd_kafka_version_str());
	fprintf(f, "librabbitmq %s\n", amqp_version());
	fprintf(
	    f, "hiredis %s (headers)\n",
	    STR(HIREDIS_MAJOR) "." STR(HIREDIS_MINOR) "." STR(HIREDIS_PATCH));
	fprintf(f, "cnats %s\n", nats_GetVersion());
	fprintf(f, "libcurl %s\n", cv ? cv->version : "?");
	fprintf(f, "jansson %s\n", jansson_version_str());
	fprintf(f, "pcre2 %s\n", pcre);
#ifdef OPENSSL_VERSION_STRING /* OpenSSL 3: "3.0.11" */
	fprintf(f, "openssl %s\n", OpenSSL_version(OPENSSL_VERSION_STRING));
#else
	fprintf(f, "%s\n", OpenSSL_version(OPENSSL_VERSION));
#endif
	fprintf(f, "libyaml %s\n", yaml_get_version_string());
	fprintf(f, "libmicrohttpd %s\n", MHD_get_version());
}
