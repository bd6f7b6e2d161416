/*-------------------------------------------------------------------------
 *
 * reach.c
 *	  The list of hosts tms may connect to, and its check on every
 *	  connection libcurl opens (reach.h).
 *
 * The libcurl callbacks only compare bytes and write into the IoReach of
 * their transfer: no allocation, no call back into the caller.
 *
 * src/io/http/reach.c
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <curl/curl.h>

#include "io/io_int.h"
#include "io/http/reach.h"

typedef enum ReachKind
{
	REACH_NAME,					/* host name, exactly */
	REACH_SUFFIX,				/* "*.example.com": names below it */
	REACH_NET4,
	REACH_NET6
} ReachKind;

typedef struct ReachEntry
{
	ReachKind	kind;
	int			port;			/* 0: any */
	int			bits;			/* network prefix length */
	unsigned char addr[16];
	size_t		name;			/* offset of the name in names[] */
} ReachEntry;

struct IoReachRules
{
	int			n;
	char	   *names;			/* inside this block, after entries[] */
	ReachEntry	entries[];
};

static const IoReachRules *current_rules = NULL;

#define SEPARATOR(c) ((c) == ',' || isspace((unsigned char) (c)))

/* Parse "1".."65535" (len bytes); -1 when it is not one. */
static int
parse_port(const char *s, size_t len)
{
	int			port = 0;

	if (len == 0 || len > 5)
		return -1;
	for (size_t i = 0; i < len; i++)
	{
		if (!isdigit((unsigned char) s[i]))
			return -1;
		port = port * 10 + (s[i] - '0');
	}
	return port >= 1 && port <= 65535 ? port : -1;
}

/* Parse an address with an optional "/bits" into e; false when bad. */
static bool
parse_net(const char *s, size_t len, bool v6, ReachEntry *e, const char **why)
{
	char		buf[64];
	const char *slash = memchr(s, '/', len);
	size_t		alen = slash ? (size_t) (slash - s) : len;
	int			max = v6 ? 128 : 32;

	if (alen == 0 || alen >= sizeof(buf))
	{
		*why = "not an address";
		return false;
	}
	memcpy(buf, s, alen);
	buf[alen] = '\0';
	if (inet_pton(v6 ? AF_INET6 : AF_INET, buf, e->addr) != 1)
	{
		*why = v6 ? "not an IPv6 address" : "not an IPv4 address or host name";
		return false;
	}
	e->kind = v6 ? REACH_NET6 : REACH_NET4;
	e->bits = max;
	if (slash != NULL)
	{
		size_t		blen = len - alen - 1;
		int			bits = 0;

		if (blen == 0 || blen > 3)
		{
			*why = "the network prefix length must be a number";
			return false;
		}
		for (size_t i = 0; i < blen; i++)
		{
			if (!isdigit((unsigned char) slash[1 + i]))
			{
				*why = "the network prefix length must be a number";
				return false;
			}
			bits = bits * 10 + (slash[1 + i] - '0');
		}
		if (bits > max)
		{
			*why = v6 ? "an IPv6 prefix length is at most 128" :
				"an IPv4 prefix length is at most 32";
			return false;
		}
		e->bits = bits;
	}
	/* ::ffff:a.b.c.d/n (n >= 96) is the IPv4 network a.b.c.d/(n - 96) */
	if (v6 && e->bits >= 96 &&
		memcmp(e->addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0)
	{
		memmove(e->addr, e->addr + 12, 4);
		e->kind = REACH_NET4;
		e->bits -= 96;
	}
	return true;
}

/* Is s (len bytes) a host name: labels of letters, digits and "-"? */
static bool
host_name(const char *s, size_t len)
{
	size_t		label = 0;
	bool		alpha = false;

	if (len == 0 || len > 253)
		return false;
	for (size_t i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];

		if (c == '.')
		{
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		if (!isalnum(c) && c != '-' && c != '_')
			return false;
		if (isalpha(c) || c == '-' || c == '_')
			alpha = true;
		if (++label > 63)
			return false;
	}
	/* all digits and dots is a malformed address, not a name */
	return label > 0 && alpha;
}

/*
 * Parse one entry s (len bytes) into e, its name (if any) appended to
 * names at *names_len.  false with *why when bad.
 */
static bool
parse_entry(const char *s, size_t len, ReachEntry *e, char *names,
			size_t *names_len, const char **why)
{
	const char *host = s;
	size_t		hlen = len;
	const char *colon;
	size_t		ncolons = 0;

	memset(e, 0, sizeof(*e));
	for (size_t i = 0; i + 3 <= len; i++)
		if (memcmp(s + i, "://", 3) == 0)
		{
			*why = "a URL: list its host instead";
			return false;
		}
	for (size_t i = 0; i < len; i++)
		if (s[i] == ':')
			ncolons++;

	if (s[0] == '[')
	{
		const char *close = memchr(s, ']', len);

		if (close == NULL)
		{
			*why = "\"[\" without \"]\"";
			return false;
		}
		if ((size_t) (close - s) + 1 < len)
		{
			if (close[1] != ':' ||
				(e->port = parse_port(close + 2, len - (close - s) - 2)) < 0)
			{
				*why = "a port must be a number from 1 to 65535 after \"]:\"";
				return false;
			}
		}
		return parse_net(s + 1, close - s - 1, true, e, why);
	}
	if (ncolons > 1)
		return parse_net(s, len, true, e, why);
	colon = memchr(s, ':', len);
	if (colon != NULL)
	{
		hlen = colon - s;
		if ((e->port = parse_port(colon + 1, len - hlen - 1)) < 0)
		{
			*why = "a port must be a number from 1 to 65535";
			return false;
		}
	}
	if (hlen == 0)
	{
		*why = "no host";
		return false;
	}
	/* a trailing "." (the DNS root) names the same host */
	if (hlen > 1 && host[hlen - 1] == '.' && host[hlen - 2] != '.')
		hlen--;
	/* an IPv4 address or network: a "/", or digits and dots only */
	if (memchr(host, '/', hlen) != NULL ||
		(isdigit((unsigned char) host[hlen - 1]) && !host_name(host, hlen)))
		return parse_net(host, hlen, false, e, why);
	e->kind = REACH_NAME;
	if (hlen >= 2 && host[0] == '*' && host[1] == '.')
	{
		e->kind = REACH_SUFFIX;
		host += 1;				/* keep the ".": matched as a suffix */
		hlen -= 1;
		if (!host_name(host + 1, hlen - 1))
		{
			*why = "not a host name below \"*.\"";
			return false;
		}
	}
	else if (!host_name(host, hlen))
	{
		*why = (hlen == 1 && host[0] == '*') ?
			"\"*\" alone is no limit: leave the setting empty instead" :
			"not a host name, address or network";
		return false;
	}
	e->name = *names_len;
	for (size_t i = 0; i < hlen; i++)
		names[(*names_len)++] = (char) tolower((unsigned char) host[i]);
	names[(*names_len)++] = '\0';
	return true;
}

int
io_reach_parse(const char *text, IoReachRules **out, char *why, size_t whylen)
{
	size_t		len = text ? strlen(text) : 0;
	int			n = 0;
	IoReachRules *r;
	size_t		names_len = 0;
	size_t		i;

	*out = NULL;
	why[0] = '\0';
	for (i = 0; i < len;)
	{
		while (i < len && SEPARATOR(text[i]))
			i++;
		if (i < len)
			n++;
		while (i < len && !SEPARATOR(text[i]))
			i++;
	}
	if (n == 0)
		return 0;
	r = malloc(sizeof(IoReachRules) + n * sizeof(ReachEntry) + len + 1);
	if (r == NULL)
	{
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	r->n = 0;
	r->names = (char *) &r->entries[n];
	for (i = 0; i < len;)
	{
		size_t		start;
		const char *reason = NULL;

		while (i < len && SEPARATOR(text[i]))
			i++;
		start = i;
		while (i < len && !SEPARATOR(text[i]))
			i++;
		if (i == start)
			continue;
		if (!parse_entry(text + start, i - start, &r->entries[r->n], r->names,
						 &names_len, &reason))
		{
			snprintf(why, whylen, "entry \"%.*s\": %s",
					 (int) (i - start > 200 ? 200 : i - start), text + start, reason);
			free(r);
			return -1;
		}
		r->n++;
	}
	*out = r;
	return 0;
}

int
io_reach_count(const IoReachRules *rules)
{
	return rules ? rules->n : 0;
}

bool
io_reach_allows_name(const IoReachRules *rules, const char *host, int port)
{
	char		h[256];
	size_t		n = strlen(host);

	if (rules == NULL || n == 0 || n >= sizeof(h))
		return false;
	for (size_t i = 0; i < n; i++)
		h[i] = (char) tolower((unsigned char) host[i]);
	if (n > 1 && h[n - 1] == '.')
		n--;
	h[n] = '\0';
	for (int i = 0; i < rules->n; i++)
	{
		const ReachEntry *e = &rules->entries[i];
		const char *name;
		size_t		nl;

		/* only name entries have a name: an address entry's is unset */
		if ((e->kind != REACH_NAME && e->kind != REACH_SUFFIX) ||
			(e->port != 0 && e->port != port))
			continue;
		name = rules->names + e->name;
		nl = strlen(name);
		if (e->kind == REACH_NAME && strcmp(h, name) == 0)
			return true;
		/* name is ".example.com": h must be longer and end with it */
		if (e->kind == REACH_SUFFIX && n > nl && strcmp(h + n - nl, name) == 0)
			return true;
	}
	return false;
}

/* Do the first bits bits of a and b agree? */
static bool
prefix_equal(const unsigned char *a, const unsigned char *b, int bits)
{
	int			whole = bits / 8;
	int			rest = bits % 8;

	if (memcmp(a, b, whole) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((a[whole] ^ b[whole]) & (0xFF << (8 - rest)) & 0xFF) == 0;
}

/* Check an address (4 or 16 bytes) and port against the address entries. */
static bool
allows_bytes(const IoReachRules *rules, bool v6, const unsigned char *addr, int port)
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};

	if (rules == NULL)
		return false;
	/* ::ffff:a.b.c.d is a.b.c.d */
	if (v6 && memcmp(addr, mapped, 12) == 0)
	{
		v6 = false;
		addr += 12;
	}
	for (int i = 0; i < rules->n; i++)
	{
		const ReachEntry *e = &rules->entries[i];

		if (e->port != 0 && e->port != port)
			continue;
		if (e->kind == (v6 ? REACH_NET6 : REACH_NET4) &&
			prefix_equal(addr, e->addr, e->bits))
			return true;
	}
	return false;
}

bool
io_reach_allows_addr(const IoReachRules *rules, const struct sockaddr *addr)
{
	if (addr->sa_family == AF_INET)
	{
		const struct sockaddr_in *in = (const struct sockaddr_in *) addr;

		return allows_bytes(rules, false, (const unsigned char *) &in->sin_addr,
							ntohs(in->sin_port));
	}
	if (addr->sa_family == AF_INET6)
	{
		const struct sockaddr_in6 *in = (const struct sockaddr_in6 *) addr;

		return allows_bytes(rules, true, in->sin6_addr.s6_addr,
							ntohs(in->sin6_port));
	}
	return false;
}

void
io_reach_set_rules(const IoReachRules *rules)
{
	current_rules = rules;
}

const IoReachRules *
io_reach_rules(void)
{
	return current_rules;
}

/* ----------------------------------------------------------------
 * The check of one transfer
 * ----------------------------------------------------------------
 */

/* Is the connection to addr (the URL's host being r->host) allowed? */
static bool
reach_allowed(const IoReach *r, bool v6, const unsigned char *addr, int port)
{
	const IoReachRules *rules = current_rules;

	if (io_reach_count(rules) == 0)
		return true;
	if (r->host[0] != '\0' && io_reach_allows_name(rules, r->host, r->port))
		return true;
	return allows_bytes(rules, v6, addr, port);
}

static void
reach_note(IoReach *r, bool v6, const void *addr, int port)
{
	r->refused = true;
	if (inet_ntop(v6 ? AF_INET6 : AF_INET, addr, r->refused_addr,
				  sizeof(r->refused_addr)) == NULL)
		snprintf(r->refused_addr, sizeof(r->refused_addr), "?");
	r->refused_port = port;
}

/* libcurl's socket-open callback: refuse before connecting. */
static curl_socket_t
reach_open(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
	IoReach    *r = clientp;
	const struct sockaddr *sa = &a->addr;

	(void) purpose;

	if (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)
	{
		bool		v6 = sa->sa_family == AF_INET6;
		const void *bytes = v6 ?
		(const void *) ((const struct sockaddr_in6 *) sa)->sin6_addr.s6_addr :
		(const void *) &((const struct sockaddr_in *) sa)->sin_addr;
		int			port = ntohs(v6 ? ((const struct sockaddr_in6 *) sa)->sin6_port :
								 ((const struct sockaddr_in *) sa)->sin_port);

		if (!reach_allowed(r, v6, bytes, port))
		{
			reach_note(r, v6, bytes, port);
			return CURL_SOCKET_BAD;
		}
		r->tried = true;
	}
	else if (io_reach_count(current_rules) > 0)
	{
		/* a Unix socket or anything else: no entry can allow it */
		r->refused = true;
		snprintf(r->refused_addr, sizeof(r->refused_addr), "(not an IP address)");
		return CURL_SOCKET_BAD;
	}
	return socket(a->family, a->socktype, a->protocol);
}

/* libcurl's pre-request callback: the same check on a reused connection. */
static int
reach_prereq(void *clientp, char *primary_ip, char *local_ip,
			 int primary_port, int local_port)
{
	IoReach    *r = clientp;
	unsigned char addr[16];
	bool		v6 = strchr(primary_ip, ':') != NULL;

	(void) local_ip;
	(void) local_port;
	if (io_reach_count(current_rules) == 0)
		return CURL_PREREQFUNC_OK;
	if (inet_pton(v6 ? AF_INET6 : AF_INET, primary_ip, addr) != 1)
	{
		/* libcurl always gives a numeric address; refuse if not */
		r->refused = true;
		snprintf(r->refused_addr, sizeof(r->refused_addr), "%.60s", primary_ip);
		r->refused_port = primary_port;
		r->aborted = true;
		return CURL_PREREQFUNC_ABORT;
	}
	if (!reach_allowed(r, v6, addr, primary_port))
	{
		reach_note(r, v6, addr, primary_port);
		r->aborted = true;
		return CURL_PREREQFUNC_ABORT;
	}
	return CURL_PREREQFUNC_OK;
}

int
io_reach_attach(void *easy, const char *url, IoReach *r, TmsError *err)
{
	CURLU	   *u;
	char	   *host = NULL;
	char	   *port = NULL;
	unsigned char probe[16];

	memset(r, 0, sizeof(*r));
	if (io_reach_count(current_rules) == 0)
		return 0;
	u = curl_url();
	if (u == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
		curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
		curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
	{
		curl_free(host);
		curl_url_cleanup(u);
		/* libcurl would refuse it too: say so in its words */
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT, "malformed URL");
	}
	/* a name, not an address literal ("[::1]", "127.0.0.1") */
	if (host[0] != '[' && inet_pton(AF_INET, host, probe) != 1)
		snprintf(r->host, sizeof(r->host), "%s", host);
	r->port = atoi(port);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);

	r->active = true;
	curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, reach_open);
	curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, r);
	curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, reach_prereq);
	curl_easy_setopt(easy, CURLOPT_PREREQDATA, r);
	return 0;
}

bool
io_reach_refused(const IoReach *r, const char *where, TmsError *err)
{
	char		detail[512];

	if (!r->active || !r->refused || (r->tried && !r->aborted))
		return false;
	tms_error_set(err, IO_ERR_FORBIDDEN,
				  "connection to %s is not allowed by tms.allowed_hosts", where);
	if (r->host[0] != '\0')
		snprintf(detail, sizeof(detail),
				 "Neither host \"%s\" port %d nor its address %s port %d is listed.",
				 r->host, r->port, r->refused_addr, r->refused_port);
	else
		snprintf(detail, sizeof(detail), "Address %s port %d is not listed.",
				 r->refused_addr, r->refused_port);
	tms_error_detail_raw(err, detail, strlen(detail));
	return true;
}
