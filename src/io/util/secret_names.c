/*-------------------------------------------------------------------------
 *
 * secret_names.c
 *	  Credential-shaped names and values (secret_names.h).
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "io/util/secret_names.h"

/*
 * Words that make a name credential-shaped, in normalised form (lowercase,
 * "-" for ".", "_" and " ").  "key-id" is here although an access key id is
 * not secret by itself: it names the credential and is never shown either.
 */
static const char *const secret_words[] = {
	"password", "passwd", "passphrase", "secret", "token", "credential",
	"access-key", "accesskey", "private-key", "privatekey", "session-key",
	"sessionkey", "api-key", "apikey", "keytab", "key-id", "authorization",
	"sas-key", "signature", "client-key",
	/* Azure: fs.azure.account.key.<account>, adls.auth.shared-key.* */
	"account-key", "accountkey", "shared-key", "sharedkey",
	/* Azure SAS: adls.sas-token.<account>, fs.azure.sas.fixed.token */
	"sas-token", "sastoken",
	/* Hadoop GCS: google.cloud.auth.service.account.json.keyfile */
	"keyfile", NULL
};

/*
 * Prefixes that make every name below them credential-shaped: Hadoop's GCS
 * authentication settings (fs.gs.auth.service.account.email names whose
 * key is used, fs.gs.auth.access.token.provider ...).  Compared anywhere in
 * the normalised name ("spark.hadoop.fs.gs.auth...." too).
 */
static const char *const secret_prefixes[] = {
	"fs-gs-auth-", NULL
};

/*
 * Whole words (between "-" after normalisation, or the ends) that make a
 * name credential-shaped: "sas" (fs.azure.sas.<container>.<account>, a
 * SAS token's own name) and "sig" (the signature parameter of a SAS URL,
 * "...&sig=...").
 */
static const char *const secret_segments[] = {
	"sas", "sig", NULL
};

/* Longest name normalised and compared; longer names are cut (safe side). */
#define MAX_NAME 256

static void
normalise(const char *s, size_t len, char *out, size_t *outlen)
{
	size_t		n = len < MAX_NAME ? len : MAX_NAME;

	for (size_t i = 0; i < n; i++)
	{
		unsigned char c = (unsigned char) s[i];

		if (c == '.' || c == '_' || c == ' ')
			c = '-';
		out[i] = (char) tolower(c);
	}
	out[n] = '\0';
	*outlen = n;
}

bool
io_secret_key(const char *key, size_t len)
{
	char		buf[MAX_NAME + 1];
	size_t		n;

	const char *azure;

	normalise(key, len, buf, &n);
	for (int i = 0; secret_words[i]; i++)
		if (strstr(buf, secret_words[i]) != NULL)
			return true;
	for (int i = 0; secret_prefixes[i]; i++)
		if (strstr(buf, secret_prefixes[i]) != NULL)
			return true;
	/* fs.azure.*key*: every Azure storage key setting, whatever its shape */
	azure = strstr(buf, "fs-azure-");
	if (azure != NULL && strstr(azure, "key") != NULL)
		return true;
	for (size_t start = 0; start < n;)
	{
		size_t		end = start;

		while (end < n && buf[end] != '-')
			end++;
		for (int i = 0; secret_segments[i]; i++)
			if (end - start == strlen(secret_segments[i]) &&
				memcmp(buf + start, secret_segments[i], end - start) == 0)
				return true;
		start = end + 1;
	}
	return false;
}

static bool
name_char(unsigned char c)
{
	return isalnum(c) || c == '.' || c == '_' || c == '-';
}

/* Does value start with an HTTP authorization scheme and a credential? */
static bool
auth_scheme(const char *v, size_t len)
{
	static const char *const schemes[] = {"bearer ", "basic ", "aws4-hmac-sha256 ", NULL};

	while (len > 0 && isspace((unsigned char) *v))
	{
		v++;
		len--;
	}
	for (int i = 0; schemes[i]; i++)
	{
		size_t		n = strlen(schemes[i]);

		if (len > n)
		{
			size_t		k;

			for (k = 0; k < n; k++)
				if (tolower((unsigned char) v[k]) != schemes[i][k])
					break;
			if (k == n)
				return true;
		}
	}
	return false;
}

/* Does scheme (len bytes) name a protocol whose user info is always a login? */
static bool
login_scheme(const char *scheme, size_t len)
{
	static const char *const schemes[] = {"http", "https", "ftp", "ftps", "ws", "wss", NULL};

	for (int i = 0; schemes[i]; i++)
		if (strlen(schemes[i]) == len && strncasecmp(scheme, schemes[i], len) == 0)
			return true;
	return false;
}

bool
io_find_userinfo(const char *value, size_t len, size_t from,
				 size_t *start, size_t *end)
{
	for (size_t i = from; i + 3 <= len; i++)
	{
		size_t		s,
					a,
					at = 0;
		bool		colon = false;

		if (memcmp(value + i, "://", 3) != 0)
			continue;
		/* the scheme: the letters, digits, "+", "-", "." before "://" */
		s = i;
		while (s > 0 && (isalnum((unsigned char) value[s - 1]) ||
						 value[s - 1] == '+' || value[s - 1] == '-' ||
						 value[s - 1] == '.'))
			s--;
		/* the authority: up to "/", "?", "#", a blank or a quote */
		for (a = i + 3; a < len; a++)
		{
			char		c = value[a];

			if (c == '/' || c == '?' || c == '#' || c == '"' || c == '\'' ||
				isspace((unsigned char) c))
				break;
			if (c == '@')
				at = a;			/* the last "@" ends the user info */
		}
		if (at == 0)
			continue;
		for (size_t k = i + 3; k < at; k++)
			if (value[k] == ':')
				colon = true;
		/* "***" is what a redacted login leaves (catalog_config) */
		if (at - (i + 3) == 3 && memcmp(value + i + 3, "***", 3) == 0)
			continue;
		if (at > i + 3 && (colon || login_scheme(value + s, i - s)))
		{
			*start = i + 3;
			*end = at;
			return true;
		}
	}
	return false;
}

bool
io_secret_value(const char *value, size_t len)
{
	size_t		i = 0;
	size_t		us,
				ue;

	if (auth_scheme(value, len))
		return true;
	if (io_find_userinfo(value, len, 0, &us, &ue))
		return true;
	while (i < len)
	{
		size_t		start;

		while (i < len && !name_char((unsigned char) value[i]))
			i++;
		start = i;
		while (i < len && name_char((unsigned char) value[i]))
			i++;
		if (i > start && i < len && (value[i] == '=' || value[i] == ':') &&
			io_secret_key(value + start, i - start))
			return true;
	}
	return false;
}
