/*-------------------------------------------------------------------------
 *
 * replay.c
 *	  A main() that replays a fuzz target over its corpus, without libFuzzer.
 *
 * Linked with one test/fuzz/fuzz_<name>.c, it calls LLVMFuzzerTestOneInput
 * once for every file named on the command line and for every regular
 * file in every directory named there (in name order, not recursing), as
 * "fuzz_<name> -runs=0 <files or directories>" does with libFuzzer.  Each
 * input is passed in a buffer of exactly its size, so that ASan sees a
 * read past its end.  make fuzz-replay builds it with gcc under ASan and
 * UBSan: a finding aborts the run, and the exit status is non-zero.  An
 * input it cannot read is an error too, as is a directory with no file:
 * a replay of nothing must not pass.
 *
 * test/fuzz/replay.c
 *
 *-------------------------------------------------------------------------
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Replay one file; returns 0, or -1 if it cannot be read. */
static int
replay_file(const char *path)
{
	FILE	   *f = fopen(path, "rb");
	struct stat st;
	uint8_t    *data;
	size_t		len;

	if (f == NULL || fstat(fileno(f), &st) != 0)
	{
		fprintf(stderr, "replay: cannot read %s: %s\n", path, strerror(errno));
		if (f != NULL)
			fclose(f);
		return -1;
	}
	len = (size_t) st.st_size;
	/* malloc(0) may return NULL; a non-empty buffer keeps the pointer valid */
	data = malloc(len > 0 ? len : 1);
	if (data == NULL || fread(data, 1, len, f) != len)
	{
		fprintf(stderr, "replay: cannot read %s\n", path);
		free(data);
		fclose(f);
		return -1;
	}
	fclose(f);
	(void) LLVMFuzzerTestOneInput(data, len);
	free(data);
	return 0;
}

static int
by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int
main(int argc, char **argv)
{
	long		ninputs = 0;
	int			rc = 0;

	if (argc < 2)
	{
		fprintf(stderr, "usage: %s FILE_OR_DIRECTORY...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++)
	{
		struct stat st;
		struct dirent **names;
		int			n,
					nfiles = 0;

		if (stat(argv[i], &st) != 0)
		{
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			rc = 1;
			continue;
		}
		if (!S_ISDIR(st.st_mode))
		{
			if (replay_file(argv[i]) != 0)
				rc = 1;
			ninputs++;
			continue;
		}
		n = scandir(argv[i], &names, NULL, by_name);
		if (n < 0)
		{
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			rc = 1;
			continue;
		}
		for (int k = 0; k < n; k++)
		{
			char		path[4096];
			struct stat fst;

			snprintf(path, sizeof(path), "%s/%s", argv[i], names[k]->d_name);
			if (stat(path, &fst) == 0 && S_ISREG(fst.st_mode))
			{
				if (replay_file(path) != 0)
					rc = 1;
				nfiles++;
				ninputs++;
			}
			free(names[k]);
		}
		free(names);
		if (nfiles == 0)
		{
			fprintf(stderr, "replay: no input in %s\n", argv[i]);
			rc = 1;
		}
	}
	printf("%s: %ld inputs replayed%s\n", argv[0], ninputs, rc ? ", with errors" : "");
	return rc;
}
