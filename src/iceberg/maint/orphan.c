/*-------------------------------------------------------------------------
 *
 * orphan.c
 *	  The valid-file set of orphan cleanup and its verdicts (see orphan.h).
 *
 * Rules: plain C; the set holds pairs of 64-bit hashes, never paths; a
 * path without a canonical form fails an addition and is UNKNOWN (kept)
 * when checked.
 *
 * src/iceberg/maint/orphan.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/iceberg_internal.h"
#include "iceberg/maint/orphan.h"
#include "iceberg/maint/pathhash.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PREFIX_SEED UINT64_C(0x5bd1e9955bd1e995)

/* Laid out as two uint64 (iceberg_sort_u64_pairs sorts them in place). */
typedef struct Pair
{
	uint64_t	path;
	uint64_t	prefix;
} Pair;

typedef char pair_is_two_uint64[sizeof(Pair) == 2 * sizeof(uint64_t) ? 1 : -1];

/* One name of a mapping key (keys are comma-separated lists). */
typedef struct Alias
{
	char	   *from;
	char	   *to;
} Alias;

struct IcebergValidSet
{
	Pair	   *v;
	size_t		n;
	size_t		cap;
	bool		sealed;
	Alias	   *schemes;
	int			nschemes;
	Alias	   *auths;
	int			nauths;
};

static int
cmp_pair(const void *a, const void *b)
{
	const Pair *x = a;
	const Pair *y = b;

	if (x->path != y->path)
		return x->path < y->path ? -1 : 1;
	if (x->prefix != y->prefix)
		return x->prefix < y->prefix ? -1 : 1;
	return 0;
}

static void
compact(IcebergValidSet *vs)
{
	size_t		i,
				w = 0;

	if (vs->n < 2)
		return;
	iceberg_sort_u64_pairs(&vs->v[0].path, vs->n);
	for (i = 0; i < vs->n; i++)
		if (w == 0 || cmp_pair(&vs->v[w - 1], &vs->v[i]) != 0)
			vs->v[w++] = vs->v[i];
	vs->n = w;
}

static char *
trimmed_dup(const char *s, size_t len)
{
	char	   *r;

	while (len > 0 && isspace((unsigned char) *s))
		s++, len--;
	while (len > 0 && isspace((unsigned char) s[len - 1]))
		len--;
	r = io_malloc(len + 1);
	if (r != NULL)
	{
		memcpy(r, s, len);
		r[len] = '\0';
	}
	return r;
}

/* Flatten "a,b" -> v mappings into aliases (Iceberg's flattenMap). */
static bool
flatten(const IcebergKeyValue *kv, int n, Alias **out, int *nout)
{
	int			i,
				total = 0;
	Alias	   *a;

	*out = NULL;
	*nout = 0;
	for (i = 0; i < n; i++)
	{
		const char *p;

		if (kv[i].key == NULL || kv[i].value == NULL)
			continue;
		total++;
		for (p = kv[i].key; *p; p++)
			if (*p == ',')
				total++;
	}
	a = io_calloc((size_t) total + 1, sizeof(Alias));
	if (a == NULL)
		return false;
	*out = a;
	for (i = 0; i < n; i++)
	{
		const char *p;

		if (kv[i].key == NULL || kv[i].value == NULL)
			continue;
		p = kv[i].key;
		for (;;)
		{
			const char *c = strchr(p, ',');
			size_t		len = c ? (size_t) (c - p) : strlen(p);

			a[*nout].from = trimmed_dup(p, len);
			a[*nout].to = trimmed_dup(kv[i].value, strlen(kv[i].value));
			if (a[*nout].from == NULL || a[*nout].to == NULL)
			{
				io_free(a[*nout].from);
				io_free(a[*nout].to);
				return false;
			}
			if (a[*nout].from[0] == '\0')
			{
				io_free(a[*nout].from);
				io_free(a[*nout].to);
			}
			else
				(*nout)++;
			if (c == NULL)
				break;
			p = c + 1;
		}
	}
	return true;
}

static void
free_aliases(Alias *a, int n)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		io_free(a[i].from);
		io_free(a[i].to);
	}
	io_free(a);
}

void
iceberg_valid_set_free(IcebergValidSet *vs)
{
	if (vs == NULL)
		return;
	io_free(vs->v);
	free_aliases(vs->schemes, vs->nschemes);
	free_aliases(vs->auths, vs->nauths);
	io_free(vs);
}

IcebergValidSet *
iceberg_valid_set_new(const IcebergOrphanOptions *opt)
{
	IcebergValidSet *vs = io_calloc(1, sizeof(IcebergValidSet));

	if (vs == NULL)
		return NULL;
	if (opt != NULL &&
		(!flatten(opt->equal_schemes, opt->equal_schemes ? opt->nequal_schemes : 0,
				  &vs->schemes, &vs->nschemes) ||
		 !flatten(opt->equal_authorities,
				  opt->equal_authorities ? opt->nequal_authorities : 0,
				  &vs->auths, &vs->nauths)))
	{
		iceberg_valid_set_free(vs);
		return NULL;
	}
	return vs;
}

/* The mapped name (first alias whose key equals it, ignoring case). */
static const char *
mapped(const Alias *a, int n, const char *s, size_t len, size_t *outlen)
{
	int			i;

	for (i = 0; i < n; i++)
		if (strlen(a[i].from) == len && strncasecmp(a[i].from, s, len) == 0)
		{
			*outlen = strlen(a[i].to);
			return a[i].to;
		}
	*outlen = len;
	return s;
}

/* Lower-case hash continuing h. */
static uint64_t
hash_lower(uint64_t h, const char *s, size_t len)
{
	size_t		i;

	for (i = 0; i < len; i++)
	{
		h ^= (unsigned char) tolower((unsigned char) s[i]);
		h *= UINT64_C(1099511628211);
	}
	return h;
}

/* The pair of a canonical location. */
static Pair
pair_of(const IcebergValidSet *vs, const char *c)
{
	const char *scheme,
			   *auth,
			   *path;
	size_t		slen,
				alen;
	uint64_t	h;
	Pair		p;

	if (strncmp(c, "s3://", 5) == 0)
	{
		const char *slash;

		scheme = c;
		slen = 2;
		auth = c + 5;
		slash = strchr(auth, '/');
		alen = slash ? (size_t) (slash - auth) : strlen(auth);
		path = slash ? slash : "";
	}
	else if (strncmp(c, "abfs://", 7) == 0)
	{
		/* Azure: "abfs://container@host/path", every spelling made one */
		const char *slash;

		scheme = c;
		slen = 4;
		auth = c + 7;
		slash = strchr(auth, '/');
		alen = slash ? (size_t) (slash - auth) : strlen(auth);
		path = slash ? slash : "";
	}
	else
	{
		scheme = "file";
		slen = 4;
		auth = "";
		alen = 0;
		path = c;
	}
	scheme = mapped(vs->schemes, vs->nschemes, scheme, slen, &slen);
	auth = mapped(vs->auths, vs->nauths, auth, alen, &alen);
	h = hash_lower(ICEBERG_HASH_INIT, scheme, slen);
	h = hash_lower(h ^ 0xff, auth, alen);
	p.prefix = iceberg_path_hash(&h, sizeof(h), PREFIX_SEED);
	p.path = iceberg_path_hash(path, strlen(path), 0);
	return p;
}

static bool
add_pair(IcebergValidSet *vs, Pair p, TmsError *err)
{
	if (vs->sealed)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "the valid-file set is sealed");
		return false;
	}
	if (vs->n == vs->cap)
	{
		size_t		ncap;
		Pair	   *nv;

		compact(vs);
		if (vs->n * 3 < vs->cap * 2)
			goto append;
		ncap = vs->cap < 1024 ? 1024 : vs->cap + vs->cap / 2;
		if (ncap > SIZE_MAX / sizeof(Pair))
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		nv = io_realloc(vs->v, ncap * sizeof(Pair));
		if (nv == NULL)
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		vs->v = nv;
		vs->cap = ncap;
	}
append:
	vs->v[vs->n++] = p;
	return true;
}

bool
iceberg_valid_set_add_path(IcebergValidSet *vs, const char *path,
						   const char *relative_root, TmsError *err)
{
	char	   *c;
	bool		ok;

	if (vs == NULL || path == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "invalid valid-set arguments");
		return false;
	}
	if (!iceberg_location_canonical(path, relative_root, &c, err))
		return false;
	ok = add_pair(vs, pair_of(vs, c), err);
	io_free(c);
	return ok;
}

typedef struct AddState
{
	IcebergValidSet *vs;
	const char *root;
} AddState;

static bool
add_cb(void *arg, const IcebergWalkFile *f, TmsError *err)
{
	AddState   *st = arg;

	return iceberg_valid_set_add_path(st->vs, f->path, st->root, err);
}

bool
iceberg_valid_set_add_table(IcebergValidSet *vs, const IcebergFileIO *io,
							const IcebergTableMetadata *md,
							const char *metadata_location,
							const char *relative_root, TmsError *err)
{
	AddState	st;

	tms_error_clear(err);
	if (vs == NULL || io == NULL || md == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "invalid valid-set arguments");
		return false;
	}
	st.vs = vs;
	st.root = relative_root;
	if (!iceberg_walk(io, md, metadata_location, NULL, -1, ICEBERG_WALK_PURGE,
					  add_cb, &st, err))
		return false;
	if (md->location != NULL && md->location[0] != '\0')
	{
		char	   *loc;
		size_t		n;
		char	   *hint;
		bool		ok;

		n = strlen(md->location);
		while (n > 0 && md->location[n - 1] == '/')
			n--;
		hint = io_malloc(n + sizeof("/metadata/version-hint.text"));
		if (hint == NULL)
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		memcpy(hint, md->location, n);
		strcpy(hint + n, "/metadata/version-hint.text");
		loc = hint;
		ok = iceberg_valid_set_add_path(vs, loc, relative_root, err);
		io_free(hint);
		if (!ok)
			return false;
	}
	return true;
}

bool
iceberg_valid_set_seal(IcebergValidSet *vs, TmsError *err)
{
	tms_error_clear(err);
	if (vs == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "invalid valid-set arguments");
		return false;
	}
	compact(vs);
	vs->sealed = true;
	return true;
}

IcebergOrphanVerdict
iceberg_valid_set_check(const IcebergValidSet *vs, const char *listed_uri)
{
	char	   *c;
	TmsError	err;
	Pair		p;
	size_t		lo = 0,
				hi;
	bool		any = false;

	if (vs == NULL || !vs->sealed || listed_uri == NULL)
		return ICEBERG_ORPHAN_UNKNOWN;
	if (!iceberg_location_canonical(listed_uri, NULL, &c, &err))
		return ICEBERG_ORPHAN_UNKNOWN;
	p = pair_of(vs, c);
	io_free(c);
	hi = vs->n;
	while (lo < hi)
	{
		size_t		mid = lo + (hi - lo) / 2;

		if (vs->v[mid].path < p.path)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < vs->n && vs->v[lo].path == p.path; lo++)
	{
		if (vs->v[lo].prefix == p.prefix)
			return ICEBERG_ORPHAN_VALID;
		any = true;
	}
	return any ? ICEBERG_ORPHAN_PREFIX_MISMATCH : ICEBERG_ORPHAN_ORPHAN;
}

const char *
iceberg_orphan_verdict_name(IcebergOrphanVerdict v)
{
	switch (v)
	{
		case ICEBERG_ORPHAN_VALID:
			return "valid";
		case ICEBERG_ORPHAN_ORPHAN:
			return "orphan";
		case ICEBERG_ORPHAN_PREFIX_MISMATCH:
			return "prefix-mismatch";
		case ICEBERG_ORPHAN_UNKNOWN:
			return "unknown";
	}
	return "unknown";
}

int64_t
iceberg_valid_set_count(const IcebergValidSet *vs)
{
	return vs ? (int64_t) vs->n : 0;
}

int64_t
iceberg_valid_set_bytes(const IcebergValidSet *vs)
{
	return vs ? (int64_t) (vs->cap * sizeof(Pair)) : 0;
}
