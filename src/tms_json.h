/*-------------------------------------------------------------------------
 *
 * tms_json.h
 *	  jansson for the plain-C layers, with the one pitfall it has in tms.
 *
 * The postgres executable exports the SQL function json_object(), an
 * unversioned symbol.  A call to jansson's json_object() from inside tms.so
 * is resolved by the dynamic linker to the executable's symbol first, so it
 * would call PostgreSQL's function and crash the backend.  (Calls made
 * inside libjansson itself, as json_loads does, bind to jansson's own.)
 *
 * So tms code never calls json_object(): it creates empty objects with
 * tms_json_object_new(), and the Makefile refuses a tms.so that references
 * json_object at all.  The compile-time clash with PostgreSQL's
 * declaration is handled by tms_jansson.h for the few PostgreSQL-facing
 * files that need jansson.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_JSON_H
#define TMS_JSON_H

#include <jansson.h>

/* A new, empty JSON object (reference count 1), or NULL if out of memory. */
static inline json_t *
tms_json_object_new(void)
{
	return json_pack("{}");
}

#endif							/* TMS_JSON_H */
