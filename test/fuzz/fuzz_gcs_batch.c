/*-------------------------------------------------------------------------
 *
 * fuzz_gcs_batch.c
 *	  libFuzzer target for the reader of Google Cloud Storage batch answers
 *	  (io_gcs_batch_read, src/io/storage/gcs_batch.c).
 *
 * The input is "Content-Type line\n" then the answer's body (not
 * NUL-terminated: the reader is bounded by the length it is given).  For
 * every input the reader returns 0 or -1 with IO_ERR_PROTOCOL (or out of
 * memory), and with 0 every one of the 8 results is either deleted with
 * no code, or not deleted with a code ("NoResult", "SlowDown", a reason).
 * Any violation aborts; ASan/UBSan and the leak checker do the rest.
 *
 * Build: make fuzz-gcs_batch (this file with every .c file of src/io).
 * Seed corpus: test/fuzz/corpus/gcs_batch/.
 *
 * test/fuzz/fuzz_gcs_batch.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/storage/storage_int.h"

#define NRESULTS 8

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nl = memchr(data, '\n', size);
	char	   *ct;
	char	   *body;
	size_t		blen;
	IoDeleteResult r[NRESULTS];
	TmsError	err;
	int			rc;

	if (nl == NULL)
		return 0;
	ct = io_strndup((const char *) data, (size_t) (nl - (const char *) data));
	blen = size - (size_t) (nl + 1 - (const char *) data);
	body = io_malloc(blen ? blen : 1);
	if (ct == NULL || body == NULL)
	{
		io_free(ct);
		io_free(body);
		return 0;
	}
	memcpy(body, nl + 1, blen);
	memset(r, 0x5a, sizeof(r));
	rc = io_gcs_batch_read(ct, body, blen, NRESULTS, r, &err);
	if (rc != 0 && err.code != IO_ERR_PROTOCOL && err.code != IO_ERR_OUT_OF_MEMORY)
		abort();
	for (int i = 0; rc == 0 && i < NRESULTS; i++)
	{
		if (memchr(r[i].code, '\0', sizeof(r[i].code)) == NULL ||
			memchr(r[i].message, '\0', sizeof(r[i].message)) == NULL)
			abort();
		if (r[i].deleted != (r[i].code[0] == '\0'))
			abort();
	}
	io_free(ct);
	io_free(body);
	return 0;
}
