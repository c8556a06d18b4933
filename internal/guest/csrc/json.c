/*
 * json.c: a small JSON reader for the daemon's replies and events, and the
 * string escaping of request bodies.
 *
 * vj_parse checks the whole document against the JSON grammar (RFC 8259)
 * and records one token per value (and per object key) in document order;
 * a container's span lets a lookup skip it whole. The text is untrusted:
 * every read is bounded by its length, nesting by VJ_MAX_DEPTH (so the
 * recursion is bounded), and the accessors check types and ranges.
 * Strings stay escaped in the text; vj_str and the key comparison unescape
 * them on the fly.
 */
#include "vrdma.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct parser {
	const char *s;
	int len, pos;
	struct vj_tok *tok;
	int ntok, cap;
};

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static void skip_space(struct parser *p)
{
	while (p->pos < p->len && is_space(p->s[p->pos]))
		p->pos++;
}

/* Appends a token; returns its index or -ENOMEM. */
static int add_token(struct parser *p, enum vj_type type, int start)
{
	if (p->ntok == p->cap) {
		if (p->cap > INT_MAX / 2)
			return -ENOMEM;
		int ncap = p->cap ? p->cap * 2 : 16;
		struct vj_tok *t = realloc(p->tok, (size_t)ncap * sizeof *t);
		if (t == NULL)
			return -ENOMEM;
		p->tok = t;
		p->cap = ncap;
	}
	struct vj_tok *t = &p->tok[p->ntok];
	t->type = type;
	t->start = start;
	t->end = start;
	t->size = 0;
	t->span = 1;
	return p->ntok++;
}

/* A string at p->pos (the opening quote). */
static int parse_string(struct parser *p)
{
	int i = add_token(p, VJ_STRING, p->pos + 1);
	if (i < 0)
		return i;
	for (p->pos++; p->pos < p->len; p->pos++) {
		unsigned char c = (unsigned char)p->s[p->pos];
		if (c == '"') {
			p->tok[i].end = p->pos++;
			return 0;
		}
		if (c < 0x20)
			return -EINVAL; /* control characters must be escaped */
		if (c != '\\')
			continue;
		if (++p->pos >= p->len)
			return -EINVAL;
		switch (p->s[p->pos]) {
		case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
			break;
		case 'u':
			if (p->len - p->pos <= 4)
				return -EINVAL;
			for (int k = 1; k <= 4; k++)
				if (hex_value(p->s[p->pos + k]) < 0)
					return -EINVAL;
			p->pos += 4;
			break;
		default:
			return -EINVAL;
		}
	}
	return -EINVAL; /* no closing quote */
}

/* Skips a run of digits; -EINVAL when there is none. */
static int digits(struct parser *p)
{
	int start = p->pos;

	while (p->pos < p->len && is_digit(p->s[p->pos]))
		p->pos++;
	return p->pos > start ? 0 : -EINVAL;
}

/* A number: -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)? */
static int parse_number(struct parser *p)
{
	int i = add_token(p, VJ_NUMBER, p->pos);
	if (i < 0)
		return i;
	if (p->s[p->pos] == '-')
		p->pos++;
	if (p->pos < p->len && p->s[p->pos] == '0')
		p->pos++;
	else if (digits(p) < 0)
		return -EINVAL;
	if (p->pos < p->len && p->s[p->pos] == '.') {
		p->pos++;
		if (digits(p) < 0)
			return -EINVAL;
	}
	if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
		p->pos++;
		if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
			p->pos++;
		if (digits(p) < 0)
			return -EINVAL;
	}
	p->tok[i].end = p->pos;
	return 0;
}

static int parse_literal(struct parser *p, const char *word, enum vj_type type)
{
	int n = (int)strlen(word);

	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, (size_t)n) != 0)
		return -EINVAL;
	int i = add_token(p, type, p->pos);
	if (i < 0)
		return i;
	p->pos += n;
	p->tok[i].end = p->pos;
	return 0;
}

static int parse_value(struct parser *p, int depth);

/* An object or an array at p->pos (its opening bracket). */
static int parse_container(struct parser *p, int depth)
{
	int object = p->s[p->pos] == '{';
	char close = object ? '}' : ']';

	if (depth >= VJ_MAX_DEPTH)
		return -EINVAL;
	int i = add_token(p, object ? VJ_OBJECT : VJ_ARRAY, p->pos);
	if (i < 0)
		return i;
	p->pos++;
	skip_space(p);
	if (p->pos < p->len && p->s[p->pos] == close) {
		p->pos++;
	} else {
		for (;;) {
			int r;
			if (object) {
				skip_space(p);
				if (p->pos >= p->len || p->s[p->pos] != '"')
					return -EINVAL;
				if ((r = parse_string(p)) < 0)
					return r;
				skip_space(p);
				if (p->pos >= p->len || p->s[p->pos] != ':')
					return -EINVAL;
				p->pos++;
			}
			if ((r = parse_value(p, depth + 1)) < 0)
				return r;
			p->tok[i].size++;
			skip_space(p);
			if (p->pos >= p->len)
				return -EINVAL;
			char c = p->s[p->pos++];
			if (c == close)
				break;
			if (c != ',')
				return -EINVAL;
		}
	}
	p->tok[i].end = p->pos;
	p->tok[i].span = p->ntok - i;
	return 0;
}

static int parse_value(struct parser *p, int depth)
{
	skip_space(p);
	if (p->pos >= p->len)
		return -EINVAL;
	char c = p->s[p->pos];
	switch (c) {
	case '{':
	case '[':
		return parse_container(p, depth);
	case '"':
		return parse_string(p);
	case 't':
		return parse_literal(p, "true", VJ_TRUE);
	case 'f':
		return parse_literal(p, "false", VJ_FALSE);
	case 'n':
		return parse_literal(p, "null", VJ_NULL);
	default:
		if (c == '-' || is_digit(c))
			return parse_number(p);
		return -EINVAL;
	}
}

int vj_parse(struct vj_doc *doc, const char *text, size_t len)
{
	if (doc == NULL)
		return -EINVAL;
	doc->text = text;
	doc->tok = NULL;
	doc->ntok = 0;
	if ((text == NULL && len > 0) || len > INT_MAX)
		return -EINVAL;

	struct parser p = { .s = text, .len = (int)len };
	int r = parse_value(&p, 0);
	if (r == 0) {
		skip_space(&p);
		if (p.pos != p.len)
			r = -EINVAL; /* something after the document */
	}
	if (r < 0) {
		free(p.tok);
		return r;
	}
	doc->tok = p.tok;
	doc->ntok = p.ntok;
	return 0;
}

void vj_free(struct vj_doc *doc)
{
	if (doc == NULL)
		return;
	free(doc->tok);
	doc->tok = NULL;
	doc->ntok = 0;
}

static const struct vj_tok *token(const struct vj_doc *doc, int i)
{
	if (doc == NULL || doc->tok == NULL || i < 0 || i >= doc->ntok)
		return NULL;
	return &doc->tok[i];
}

static int put_utf8(unsigned char *out, uint32_t cp)
{
	if (cp < 0x80) {
		out[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (unsigned char)(0xc0 | cp >> 6);
		out[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (unsigned char)(0xe0 | cp >> 12);
		out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (unsigned char)(0xf0 | cp >> 18);
	out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

/* The \uXXXX at s[i] (the backslash), if there is one before end; else -1. */
static int32_t u_escape(const char *s, int i, int end)
{
	if (end - i < 6 || s[i] != '\\' || s[i + 1] != 'u')
		return -1;
	int32_t v = 0;
	for (int k = 2; k < 6; k++) {
		int h = hex_value(s[i + k]);
		if (h < 0)
			return -1;
		v = v << 4 | h;
	}
	return v;
}

/*
 * Decodes the character of an escaped string at s[*i] (before end) into
 * out, advancing *i; returns the number of bytes (1 to 4), or -1 when the
 * escape is malformed. A surrogate pair becomes one code point; an unpaired
 * surrogate becomes U+FFFD, as Go's decoder does.
 */
static int next_char(const char *s, int *i, int end, unsigned char out[4])
{
	char c = s[*i];

	if (c != '\\') {
		out[0] = (unsigned char)c;
		(*i)++;
		return 1;
	}
	if (end - *i < 2)
		return -1;
	switch (s[*i + 1]) {
	case '"': c = '"'; break;
	case '\\': c = '\\'; break;
	case '/': c = '/'; break;
	case 'b': c = '\b'; break;
	case 'f': c = '\f'; break;
	case 'n': c = '\n'; break;
	case 'r': c = '\r'; break;
	case 't': c = '\t'; break;
	case 'u': {
		int32_t cp = u_escape(s, *i, end);
		if (cp < 0)
			return -1;
		*i += 6;
		if (cp >= 0xd800 && cp < 0xdc00) {
			int32_t lo = u_escape(s, *i, end);
			if (lo >= 0xdc00 && lo < 0xe000) {
				*i += 6;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			} else {
				cp = 0xfffd;
			}
		} else if (cp >= 0xdc00 && cp < 0xe000) {
			cp = 0xfffd;
		}
		return put_utf8(out, (uint32_t)cp);
	}
	default:
		return -1;
	}
	out[0] = (unsigned char)c;
	*i += 2;
	return 1;
}

/* Whether the string token t, unescaped, equals key. */
static int string_equals(const struct vj_doc *doc, const struct vj_tok *t, const char *key)
{
	size_t k = 0;

	for (int i = t->start; i < t->end;) {
		unsigned char b[4];
		int n = next_char(doc->text, &i, t->end, b);
		if (n < 0)
			return 0;
		for (int j = 0; j < n; j++, k++)
			if (key[k] == '\0' || (unsigned char)key[k] != b[j])
				return 0;
	}
	return key[k] == '\0';
}

int vj_get(const struct vj_doc *doc, int obj, const char *key)
{
	const struct vj_tok *o = token(doc, obj);

	if (o == NULL || o->type != VJ_OBJECT || key == NULL)
		return -1;
	int i = obj + 1;
	for (int n = 0; n < o->size; n++) {
		const struct vj_tok *k = token(doc, i), *v = token(doc, i + 1);
		if (k == NULL || v == NULL || k->type != VJ_STRING)
			return -1;
		if (string_equals(doc, k, key))
			return i + 1;
		i += 1 + v->span;
	}
	return -1;
}

int vj_at(const struct vj_doc *doc, int arr, int idx)
{
	const struct vj_tok *a = token(doc, arr);

	if (a == NULL || a->type != VJ_ARRAY || idx < 0 || idx >= a->size)
		return -1;
	int i = arr + 1;
	for (int n = 0; n < idx; n++) {
		const struct vj_tok *e = token(doc, i);
		if (e == NULL)
			return -1;
		i += e->span;
	}
	return token(doc, i) != NULL ? i : -1;
}

int vj_len(const struct vj_doc *doc, int tok)
{
	const struct vj_tok *t = token(doc, tok);

	if (t == NULL || (t->type != VJ_ARRAY && t->type != VJ_OBJECT))
		return -1;
	return t->size;
}

/* The digits of an integer token, without sign, as an unsigned value. */
static int magnitude(const char *s, int start, int end, uint64_t *v)
{
	uint64_t x = 0;

	if (start >= end)
		return -EINVAL;
	for (int i = start; i < end; i++) {
		if (!is_digit(s[i]))
			return -EINVAL; /* a fraction or an exponent */
		unsigned d = (unsigned)(s[i] - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -EINVAL;
		x = x * 10 + d;
	}
	*v = x;
	return 0;
}

int vj_u64(const struct vj_doc *doc, int tok, uint64_t *v)
{
	const struct vj_tok *t = token(doc, tok);

	if (t == NULL || t->type != VJ_NUMBER || v == NULL)
		return -EINVAL;
	return magnitude(doc->text, t->start, t->end, v); /* '-' is not a digit */
}

int vj_i64(const struct vj_doc *doc, int tok, int64_t *v)
{
	const struct vj_tok *t = token(doc, tok);
	uint64_t m;

	if (t == NULL || t->type != VJ_NUMBER || v == NULL)
		return -EINVAL;
	int neg = doc->text[t->start] == '-';
	if (magnitude(doc->text, t->start + neg, t->end, &m) < 0)
		return -EINVAL;
	if (neg) {
		if (m > (uint64_t)INT64_MAX + 1)
			return -EINVAL;
		*v = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
	} else {
		if (m > (uint64_t)INT64_MAX)
			return -EINVAL;
		*v = (int64_t)m;
	}
	return 0;
}

int vj_bool(const struct vj_doc *doc, int tok, int *v)
{
	const struct vj_tok *t = token(doc, tok);

	if (t == NULL || (t->type != VJ_TRUE && t->type != VJ_FALSE) || v == NULL)
		return -EINVAL;
	*v = t->type == VJ_TRUE;
	return 0;
}

int vj_str(const struct vj_doc *doc, int tok, char *buf, size_t cap)
{
	const struct vj_tok *t = token(doc, tok);
	size_t o = 0;

	if (buf != NULL && cap > 0)
		buf[0] = '\0';
	if (t == NULL || t->type != VJ_STRING)
		return -EINVAL;
	if (buf == NULL || cap == 0)
		return -ENOSPC;
	for (int i = t->start; i < t->end;) {
		unsigned char b[4];
		int n = next_char(doc->text, &i, t->end, b);
		if (n < 0)
			goto invalid;
		if ((size_t)n >= cap - o) {
			buf[0] = '\0';
			return -ENOSPC;
		}
		for (int j = 0; j < n; j++) {
			if (b[j] == 0)
				goto invalid;
			buf[o++] = (char)b[j];
		}
	}
	buf[o] = '\0';
	return 0;
invalid:
	buf[0] = '\0';
	return -EINVAL;
}

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int vj_b64(const struct vj_doc *doc, int tok, uint8_t *buf, size_t cap, size_t *n)
{
	const struct vj_tok *t = token(doc, tok);
	uint32_t group = 0; /* the sextets of the current group of four */
	int have = 0;       /* sextets in group */
	int pad = 0;        /* '=' seen; then only the group's second '=' may follow */
	size_t o = 0;

	if (n != NULL)
		*n = 0;
	if (t == NULL || (t->type != VJ_STRING && t->type != VJ_NULL))
		return -EINVAL;
	if (t->type == VJ_NULL)
		return 0;
	for (int i = t->start; i < t->end;) {
		unsigned char b[4];
		if (next_char(doc->text, &i, t->end, b) != 1)
			return -EINVAL; /* an escape of a non-ASCII character */
		if (b[0] == '\r' || b[0] == '\n')
			continue; /* Go's decoder skips line breaks */
		if (b[0] == '=') {
			/* "xx==" ends with one byte, "xxx=" with two */
			if ((pad == 0 && have < 2) || (pad == 1 && have != 2) || pad == 2)
				return -EINVAL;
			pad++;
			continue;
		}
		int v = b64_value(b[0]);
		if (v < 0 || pad > 0)
			return -EINVAL;
		group = group << 6 | (uint32_t)v;
		if (++have == 4) {
			if (cap - o < 3)
				return -ENOSPC;
			buf[o++] = (uint8_t)(group >> 16);
			buf[o++] = (uint8_t)(group >> 8);
			buf[o++] = (uint8_t)group;
			group = 0;
			have = 0;
		}
	}
	if (have + pad != 0 && have + pad != 4)
		return -EINVAL; /* a group cut short */
	if (pad > 0) {
		size_t bytes = (size_t)have - 1;
		group <<= 6 * pad;
		if (cap - o < bytes)
			return -ENOSPC;
		buf[o++] = (uint8_t)(group >> 16);
		if (bytes == 2)
			buf[o++] = (uint8_t)(group >> 8);
	}
	if (n != NULL)
		*n = o;
	return 0;
}

int vj_get_u64(const struct vj_doc *doc, int obj, const char *key, uint64_t *v)
{
	return vj_u64(doc, vj_get(doc, obj, key), v);
}

int vj_get_i64(const struct vj_doc *doc, int obj, const char *key, int64_t *v)
{
	return vj_i64(doc, vj_get(doc, obj, key), v);
}

int vj_get_str(const struct vj_doc *doc, int obj, const char *key, char *buf, size_t cap)
{
	return vj_str(doc, vj_get(doc, obj, key), buf, cap);
}

/* Appends n bytes to dst at *o, keeping room for the terminating NUL. */
static int put(char *dst, size_t cap, size_t *o, const char *s, size_t n)
{
	if (cap == 0 || n > cap - 1 - *o)
		return -ENOSPC;
	memcpy(dst + *o, s, n);
	*o += n;
	return 0;
}

int vj_escape(char *dst, size_t cap, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	if (s == NULL)
		return -EINVAL;
	if (dst == NULL || cap == 0)
		return -ENOSPC;
	dst[0] = '\0';
	if (put(dst, cap, &o, "\"", 1) < 0)
		return -ENOSPC;
	for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++) {
		char e[6] = { '\\', 0, 0, 0, 0, 0 };
		size_t n = 2;
		switch (*c) {
		case '"': e[1] = '"'; break;
		case '\\': e[1] = '\\'; break;
		case '\n': e[1] = 'n'; break;
		case '\r': e[1] = 'r'; break;
		case '\t': e[1] = 't'; break;
		case '\b': e[1] = 'b'; break;
		case '\f': e[1] = 'f'; break;
		default:
			if (*c < 0x20) {
				e[1] = 'u';
				e[2] = '0';
				e[3] = '0';
				e[4] = hex[*c >> 4];
				e[5] = hex[*c & 0xf];
				n = 6;
			} else {
				e[0] = (char)*c;
				n = 1;
			}
		}
		if (put(dst, cap, &o, e, n) < 0)
			goto nospace;
	}
	if (put(dst, cap, &o, "\"", 1) < 0 || o > INT_MAX)
		goto nospace;
	dst[o] = '\0';
	return (int)o;
nospace:
	dst[0] = '\0';
	return -ENOSPC;
}
