/*-------------------------------------------------------------------------
 *
 * reach.h
 *	  Which hosts tms may connect to: the parsed form of the setting
 *	  tms.allowed_hosts, and its check on every connection libcurl opens.
 *
 * A list is a text of entries separated by commas or blanks:
 *
 *	  catalog.example.com		a host name, exactly (case-insensitive)
 *	  *.example.com				every name below example.com
 *	  10.1.2.3, ::1				an address
 *	  10.0.0.0/8, fd00::/8		a network
 *	  name:8181, 10.0.0.0/8:443, [::1]:8181, [fd00::/8]:443
 *								the same on one port only
 *
 * An empty list sets no limit.  Otherwise a connection is allowed when the
 * host named in the URL matches a name entry (its port, the URL's, too),
 * or when the address actually connected, after name resolution, matches
 * an address or network entry (and its port).  An IPv4-mapped IPv6
 * address is matched as the IPv4 address it carries.  The address check
 * runs in libcurl's socket-open callback, before the connection is made,
 * and again before each request on a connection libcurl reuses, so a
 * name resolving elsewhere later (DNS rebinding) gains nothing; tms never
 * follows redirects (http.c).  Through a proxy (libcurl's http_proxy and
 * https_proxy environment variables) the address connected is the
 * proxy's.
 *
 * A parsed list is one block from malloc() itself, not io_malloc
 * (io_memory.h), and free() releases it, so that a
 * PostgreSQL setting can keep it as its "extra".  The list in force is a
 * process-wide pointer (io_reach_set_rules): the bridge sets it from the
 * setting, the compaction helper from its hello; every request of the
 * process, whoever made it, is checked against it.
 *
 * Plain C: no PostgreSQL header.
 *
 * src/io/http/reach.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_REACH_H
#define TMS_IO_REACH_H

#include <stdbool.h>
#include <stddef.h>

#include "io/io_error.h"

struct sockaddr;

typedef struct IoReachRules IoReachRules;

/*
 * Parse text into a list; *out is NULL for an empty list.  Returns 0, or
 * -1 with the reason in why (one line, naming the bad entry) and *out
 * NULL.  Out of memory is a failure with why "out of memory".
 */
extern int	io_reach_parse(const char *text, IoReachRules **out,
						   char *why, size_t whylen);

/* The number of entries of a list (0 for NULL). */
extern int	io_reach_count(const IoReachRules *rules);

/* Does a name entry allow host (a name, not an address) on port? */
extern bool io_reach_allows_name(const IoReachRules *rules, const char *host, int port);

/*
 * Does an address entry allow addr (an AF_INET or AF_INET6 socket
 * address, the port in it)?
 */
extern bool io_reach_allows_addr(const IoReachRules *rules, const struct sockaddr *addr);

/*
 * The list every connection of this process is checked against; NULL (the
 * start): no limit.  The caller keeps rules alive until it sets another.
 */
extern void io_reach_set_rules(const IoReachRules *rules);
extern const IoReachRules *io_reach_rules(void);

/* ----------------------------------------------------------------
 * The check of one transfer (http.c)
 * ----------------------------------------------------------------
 */
typedef struct IoReach
{
	bool		active;			/* callbacks installed */
	char		host[256];		/* the URL's host, "" when not a name */
	int			port;			/* the URL's port, its scheme's default */
	bool		refused;		/* a connection was refused */
	bool		tried;			/* another one was let through */
	bool		aborted;		/* a request on a reused one was refused */
	char		refused_addr[64];	/* its address */
	int			refused_port;
} IoReach;

/*
 * Before a transfer of url on easy (a CURL *, after curl_easy_reset):
 * when a list is in force, install the callbacks that check every
 * connection against it, writing into *r (which must stay at its address
 * until the transfer ends).  Returns 0, or -1 with *err.
 */
extern int	io_reach_attach(void *easy, const char *url, IoReach *r, TmsError *err);

/*
 * After a failed transfer: if it failed for a refusal (every address of
 * the host refused, or a reused connection's), set *err (IO_ERR_FORBIDDEN,
 * naming the host) and return true.  A host with one address refused and
 * another let through failed for what that one met.
 */
extern bool io_reach_refused(const IoReach *r, const char *where, TmsError *err);

#endif							/* TMS_IO_REACH_H */
