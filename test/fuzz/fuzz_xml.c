/*-------------------------------------------------------------------------
 *
 * fuzz_xml.c
 *	  libFuzzer target for the hand-written S3 XML reader of src/io/storage/s3_xml.c.
 *
 * The input is an XML document as S3 would answer it.  io_xml_parse must
 * return a tree or NULL with IO_ERR_PROTOCOL (or TOO_LARGE, OUT_OF_MEMORY),
 * never having held more than its budget (twice the input, plus a base,
 * as its allocator counts); the tree
 * is walked the way storage_s3.c reads listings, delete results and error
 * documents, checking that every node has a name and a text, and freed.
 * Any violation aborts; ASan/UBSan and the leak checker do the rest.
 *
 * Build: make fuzz-xml (this file with every .c file of src/io).
 * Seed corpus: test/fuzz/corpus/xml/ (S3 responses).
 *
 * test/fuzz/fuzz_xml.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

/* Walk a subtree; abort on a node without a name or a text. */
static size_t
walk(const IoXmlNode *n, int depth)
{
	size_t		count = 0;

	if (depth > 1000)
		abort();
	for (; n != NULL; n = n->next)
	{
		if (n->name == NULL || n->text == NULL)
			abort();
		(void) strlen(n->text);
		count += 1 + walk(n->children, depth + 1);
	}
	return count;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	TmsError	err;
	IoXmlNode  *doc;
	const IoXmlNode *c;
	IoXmlStats	stats;

	tms_error_clear(&err);
	doc = io_xml_parse_stats((const char *) data, size, &stats, &err);
	if (stats.peak > stats.limit || stats.limit > 2 * size + 16 * 1024)
		abort();
	if (doc == NULL)
	{
		if (err.code != IO_ERR_PROTOCOL && err.code != IO_ERR_TOO_LARGE &&
			err.code != IO_ERR_OUT_OF_MEMORY)
			abort();
		return 0;
	}
	(void) walk(doc, 0);
	/* what storage_s3.c reads */
	(void) io_xml_child_text(doc, "IsTruncated");
	(void) io_xml_child_text(doc, "NextContinuationToken");
	(void) io_xml_child_text(doc, "Code");
	(void) io_xml_child_text(doc, "Message");
	for (c = doc->children; c != NULL; c = c->next)
	{
		(void) io_xml_child_text(c, "Key");
		(void) io_xml_child_text(c, "Size");
		(void) io_xml_child_text(c, "LastModified");
		(void) io_xml_child(c, "Code");
	}
	io_xml_free(doc);
	return 0;
}
