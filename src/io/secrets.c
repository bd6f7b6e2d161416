/*-------------------------------------------------------------------------
 *
 * secrets.c
 *	  Credential-shaped names and values (secrets.h).
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <string.h>

#include "io/secrets.h"

/*
 * Words that make a name credential-shaped, in normalised form (lowercase,
 * "-" for ".", "_" and " ").  "key-id" is here although an access key id is
 * not secret by itself: it names the credential and is never shown either.
 */
static const char *const secret_words[] = {
	"password", "passwd", "passphrase", "secret", "token", "credential",
	"access-key", "accesskey", "private-key", "privatekey", "session-key",
	"sessionkey", "api-key", "apikey", "keytab", "key-id", "authorization",
	"sas-key", "signature", "client-key", NULL
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

	normalise(key, len, buf, &n);
	for (int i = 0; secret_words[i]; i++)
		if (strstr(buf, secret_words[i]) != NULL)
			return true;
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

bool
io_secret_value(const char *value, size_t len)
{
	size_t		i = 0;

	if (auth_scheme(value, len))
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
