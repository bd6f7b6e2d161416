/*-------------------------------------------------------------------------
 *
 * fuzz_blob_batch.c
 *	  libFuzzer target for the reader of Azure Blob Batch answers
 *	  (io_azure_batch_read, src/io/storage/azure_batch.c).
 *
 * The input is "Content-Type value\nbody": the answer's Content-Type
 * header (its boundary) and its multipart body, read for 1 to 300
 * sub-requests (the count taken from the first byte).  The reader either
 * fails with IO_ERR_PROTOCOL (no usable boundary) or fills every result:
 * each is deleted, or not deleted with a non-empty code; a code and a
 * message are NUL-terminated within their arrays.  Any violation aborts;
 * ASan/UBSan and the leak checker do the rest.
 *
 * Build: make fuzz-blob_batch (this file with every .c file of src/io).
 * Seed corpus: test/fuzz/corpus/blob_batch/.
 *
 * test/fuzz/fuzz_blob_batch.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "io/io_int.h"
#include "io/storage/storage_int.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *buf = io_malloc(size + 1);
	char	   *nl;
	char	   *line;
	char	   *items[1];
	IoHttpResponse resp;
	IoDeleteResult *r;
	TmsError	err;
	size_t		n;

	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	n = size > 0 ? 1 + (size_t) data[0] % 300 : 1;
	nl = strchr(buf, '\n');
	line = io_malloc(strlen("content-type: ") + (nl ? (size_t) (nl - buf) : size) + 1);
	r = io_calloc(n, sizeof(IoDeleteResult));
	if (line == NULL || r == NULL)
	{
		io_free(buf);
		io_free(line);
		io_free(r);
		return 0;
	}
	strcpy(line, "content-type: ");
	strncat(line, buf, nl ? (size_t) (nl - buf) : size);
	items[0] = line;
	memset(&resp, 0, sizeof(resp));
	resp.status = 202;
	resp.body = nl ? nl + 1 : buf + size;
	resp.body_len = strlen(resp.body);
	resp.headers.items = items;
	resp.headers.n = 1;
	if (io_azure_batch_read(&resp, n, r, &err) != 0)
	{
		if (err.code != IO_ERR_PROTOCOL && err.code != IO_ERR_OUT_OF_MEMORY)
			abort();
	}
	else
		for (size_t i = 0; i < n; i++)
		{
			if (memchr(r[i].code, '\0', sizeof(r[i].code)) == NULL ||
				memchr(r[i].message, '\0', sizeof(r[i].message)) == NULL)
				abort();
			if (!r[i].deleted && r[i].code[0] == '\0')
				abort();
		}
	io_free(r);
	io_free(line);
	io_free(buf);
	return 0;
}
