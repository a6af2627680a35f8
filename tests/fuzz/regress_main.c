/*
 * Regression driver for a fuzz target: feeds every file of the given
 * corpus directories (or the given files) to LLVMFuzzerTestOneInput, so the
 * corpora run as ordinary tests with any compiler.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		return -1;
	}
	size_t cap = 4096, len = 0;
	uint8_t *buf = malloc(cap);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			uint8_t *p = realloc(buf, cap *= 2);
			if (!p) {
				free(buf);
				buf = NULL;
			}
			buf = p;
		}
	}
	fclose(f);
	if (!buf)
		return -1;
	/* An exact-size copy, so ASan sees reads past the input. */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	return 0;
}

/* A check that fails inside the target aborts the process, so reaching
 * the summary means every input passed; "failed" counts unreadable
 * files. */
static int run_path(const char *path, int *count)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		fprintf(stderr, "cannot stat %s\n", path);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (run_file(path) < 0)
			return -1;
		(*count)++;
		return 0;
	}
	DIR *d = opendir(path);
	if (!d)
		return -1;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		size_t n = strlen(path) + strlen(e->d_name) + 2;
		char *p = malloc(n);
		if (!p) {
			rc = -1;
			break;
		}
		snprintf(p, n, "%s/%s", path, e->d_name);
		if (run_path(p, count) < 0)
			rc = -1;
		free(p);
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	int count = 0, failed = 0;
	for (int i = 1; i < argc; i++)
		if (run_path(argv[i], &count) < 0)
			failed++;
	if (count == 0 && failed == 0) {
		fprintf(stderr, "no corpus files given\n");
		failed = 1;
	}
	printf("%d passed, %d failed\n", count, failed);
	return failed ? 1 : 0;
}
