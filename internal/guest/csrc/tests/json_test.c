/*
 * json_test.c: the JSON reader (json.c) against valid, invalid, truncated
 * and random documents. Every document is parsed from a heap copy of exactly
 * its length, without a terminating NUL, so that the sanitizers catch a read
 * past the end.
 */
#include "vrdma.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* A document parsed from an exact-length heap copy of its text. */
struct doc {
	struct vj_doc d;
	char *text;
	int rc;
};

static void parse_n(struct doc *x, const char *s, size_t len)
{
	x->text = malloc(len ? len : 1);
	if (x->text == NULL) {
		perror("malloc");
		exit(2);
	}
	memcpy(x->text, s, len);
	x->rc = vj_parse(&x->d, x->text, len);
}

static void parse(struct doc *x, const char *s)
{
	parse_n(x, s, strlen(s));
}

static void done(struct doc *x)
{
	vj_free(&x->d);
	free(x->text);
}

static const struct {
	const char *text;
	int ntok;
} valid[] = {
	{ "{}", 1 },
	{ "[]", 1 },
	{ "0", 1 },
	{ "-0", 1 },
	{ "123", 1 },
	{ "-1.5e+10", 1 },
	{ "2E-3", 1 },
	{ "0.25", 1 },
	{ "\"\"", 1 },
	{ "\"a\"", 1 },
	{ "true", 1 },
	{ "false", 1 },
	{ "null", 1 },
	{ " \t\r\n{ } \n", 1 },
	{ "{\"a\":1}", 3 },
	{ "{\"a\":1,\"b\":[1,2,{\"c\":null}]}", 10 },
	{ "[[[]]]", 3 },
	{ "[1,\"x\",true,false,null,{},[]]", 8 },
	{ "\"\\u00e9\\ud83d\\ude00\\n\\\"\\\\\\/\\b\\f\\r\\t\"", 1 },
	{ "\"caf\xc3\xa9\"", 1 },
	{ "{ \"k\" : [ 1 , 2 ] , \"l\" : { } }", 7 },
};

static const char *invalid[] = {
	"", " ", "{", "}", "[", "]", "[1,]", "[,1]", "{\"a\"}", "{\"a\":}", "{\"a\":1,}",
	"{a:1}", "{1:1}", "01", "-01", "1.", ".5", "-", "1e", "1e+", "+1", "0x10", "tru",
	"nul", "falsey", "True", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"", "\"a\nb\"",
	"\"a\tb\"", "[1 2]", "{} {}", "1 2", "\"\\", "'a'", "[1]]", "{\"a\":1}}", "[1,2",
	"{\"a\" 1}", "{\"a\":1 \"b\":2}", "NaN", "Infinity", "-Infinity", "[-]", "/* */1",
};

static void test_valid(void)
{
	for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
		struct doc x;
		parse(&x, valid[i].text);
		CHECK(x.rc == 0, "parse(%s) = %d, want 0", valid[i].text, x.rc);
		CHECK(x.rc != 0 || x.d.ntok == valid[i].ntok, "parse(%s): %d tokens, want %d", valid[i].text,
		      x.d.ntok, valid[i].ntok);
		CHECK(x.rc != 0 || x.d.tok[0].span == x.d.ntok, "parse(%s): root spans %d of %d tokens",
		      valid[i].text, x.d.tok[0].span, x.d.ntok);
		done(&x);
	}
}

static void test_invalid(void)
{
	for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
		struct doc x;
		parse(&x, invalid[i]);
		CHECK(x.rc == -EINVAL, "parse(%s) = %d, want -EINVAL", invalid[i], x.rc);
		CHECK(x.d.tok == NULL && x.d.ntok == 0, "parse(%s) failed but left tokens", invalid[i]);
		done(&x);
	}
	/* A NUL byte is no whitespace: nothing may follow the document. */
	struct doc x;
	parse_n(&x, "[1]\0", 4);
	CHECK(x.rc == -EINVAL, "a NUL after the document: %d, want -EINVAL", x.rc);
	done(&x);
	parse_n(&x, "\"a\0b\"", 5);
	CHECK(x.rc == -EINVAL, "a raw NUL in a string: %d, want -EINVAL", x.rc);
	done(&x);

	struct vj_doc d;
	CHECK(vj_parse(&d, NULL, 0) == -EINVAL, "no text");
	CHECK(vj_parse(&d, NULL, 5) == -EINVAL, "NULL text with a length");
	CHECK(vj_parse(&d, "1", (size_t)INT_MAX + 1) == -EINVAL, "a length above INT_MAX");
	CHECK(vj_parse(NULL, "1", 1) == -EINVAL, "no doc");
	vj_free(NULL);
}

static char *nested(int depth, const char *open, const char *close)
{
	char *s = malloc((size_t)depth * 2 + 1);
	if (s == NULL)
		exit(2);
	for (int i = 0; i < depth; i++) {
		s[i] = open[i % strlen(open)];
		s[2 * depth - 1 - i] = close[i % strlen(close)];
	}
	s[2 * depth] = '\0';
	return s;
}

static void test_depth(void)
{
	struct doc x;
	char *s = nested(VJ_MAX_DEPTH, "[", "]");
	parse(&x, s);
	CHECK(x.rc == 0, "%d nested arrays: %d, want 0", VJ_MAX_DEPTH, x.rc);
	CHECK(x.rc != 0 || x.d.ntok == VJ_MAX_DEPTH, "%d nested arrays: %d tokens", VJ_MAX_DEPTH, x.d.ntok);
	done(&x);
	free(s);

	s = nested(VJ_MAX_DEPTH + 1, "[", "]");
	parse(&x, s);
	CHECK(x.rc == -EINVAL, "%d nested arrays: %d, want -EINVAL", VJ_MAX_DEPTH + 1, x.rc);
	done(&x);
	free(s);

	/* Deep enough to overflow the stack of an unbounded recursive parser. */
	s = nested(1000000, "[", "]");
	parse(&x, s);
	CHECK(x.rc == -EINVAL, "a million nested arrays: %d, want -EINVAL", x.rc);
	done(&x);
	free(s);

	/* Objects count as well: {"a":{"a":...1}}. */
	size_t n = VJ_MAX_DEPTH + 1;
	s = malloc(n * 6 + 2);
	if (s == NULL)
		exit(2);
	size_t o = 0;
	for (size_t i = 0; i < n; i++)
		o += (size_t)sprintf(s + o, "{\"a\":");
	s[o++] = '1';
	for (size_t i = 0; i < n; i++)
		s[o++] = '}';
	s[o] = '\0';
	parse(&x, s);
	CHECK(x.rc == -EINVAL, "%zu nested objects: %d, want -EINVAL", n, x.rc);
	done(&x);
	parse_n(&x, s + 5, o - 6); /* one level less */
	CHECK(x.rc == 0, "%d nested objects: %d, want 0", VJ_MAX_DEPTH, x.rc);
	done(&x);
	free(s);
}

static const char lookup_doc[] =
	"{\"name\":\"mlx\",\"n\":42,\"neg\":-7,\"big\":18446744073709551615,"
	"\"over\":18446744073709551616,\"f\":1.5,\"e\":1e3,\"t\":true,\"no\":false,"
	"\"arr\":[10,{\"x\":1},[2,3],\"s\"],\"nested\":{\"a\":{\"b\":\"deep\"}},"
	"\"esc\\\"key\":5,\"u\\u0041\":6,\"dup\":1,\"dup\":2,\"nil\":null,"
	"\"imin\":-9223372036854775808,\"imin1\":-9223372036854775809,"
	"\"imax\":9223372036854775807,\"imax1\":9223372036854775808,\"z\":-0}";

static void test_lookup(void)
{
	struct doc x;
	parse(&x, lookup_doc);
	CHECK(x.rc == 0, "parse(lookup_doc) = %d", x.rc);
	if (x.rc != 0) {
		done(&x);
		return;
	}
	const struct vj_doc *d = &x.d;
	char buf[64];
	uint64_t u;
	int64_t i;
	int b;

	CHECK(vj_len(d, 0) == 21, "root has %d keys, want 21", vj_len(d, 0));
	CHECK(vj_get_str(d, 0, "name", buf, sizeof buf) == 0 && strcmp(buf, "mlx") == 0, "name = %s", buf);
	CHECK(vj_get_u64(d, 0, "n", &u) == 0 && u == 42, "n");
	CHECK(vj_get_i64(d, 0, "n", &i) == 0 && i == 42, "n as i64");
	CHECK(vj_get_u64(d, 0, "neg", &u) == -EINVAL, "a negative u64");
	CHECK(vj_get_i64(d, 0, "neg", &i) == 0 && i == -7, "neg = %lld", (long long)i);
	CHECK(vj_get_u64(d, 0, "big", &u) == 0 && u == UINT64_MAX, "big");
	CHECK(vj_get_i64(d, 0, "big", &i) == -EINVAL, "big as i64");
	CHECK(vj_get_u64(d, 0, "over", &u) == -EINVAL, "2^64 as u64");
	CHECK(vj_get_u64(d, 0, "f", &u) == -EINVAL, "a fraction as u64");
	CHECK(vj_get_i64(d, 0, "f", &i) == -EINVAL, "a fraction as i64");
	CHECK(vj_get_u64(d, 0, "e", &u) == -EINVAL, "an exponent as u64");
	CHECK(vj_get_i64(d, 0, "imin", &i) == 0 && i == INT64_MIN, "INT64_MIN");
	CHECK(vj_get_i64(d, 0, "imin1", &i) == -EINVAL, "INT64_MIN-1");
	CHECK(vj_get_i64(d, 0, "imax", &i) == 0 && i == INT64_MAX, "INT64_MAX");
	CHECK(vj_get_i64(d, 0, "imax1", &i) == -EINVAL, "INT64_MAX+1 as i64");
	CHECK(vj_get_u64(d, 0, "imax1", &u) == 0 && u == (uint64_t)INT64_MAX + 1, "INT64_MAX+1 as u64");
	CHECK(vj_get_i64(d, 0, "z", &i) == 0 && i == 0, "-0 as i64");
	CHECK(vj_get_u64(d, 0, "z", &u) == -EINVAL, "-0 as u64");
	CHECK(vj_bool(d, vj_get(d, 0, "t"), &b) == 0 && b == 1, "t");
	CHECK(vj_bool(d, vj_get(d, 0, "no"), &b) == 0 && b == 0, "no");
	CHECK(vj_bool(d, vj_get(d, 0, "n"), &b) == -EINVAL, "a number as bool");
	CHECK(vj_get_u64(d, 0, "name", &u) == -EINVAL, "a string as u64");
	CHECK(vj_get_str(d, 0, "n", buf, sizeof buf) == -EINVAL, "a number as string");
	CHECK(vj_get_str(d, 0, "nil", buf, sizeof buf) == -EINVAL, "null as string");
	CHECK(d->tok[vj_get(d, 0, "nil")].type == VJ_NULL, "nil is null");

	int arr = vj_get(d, 0, "arr");
	CHECK(vj_len(d, arr) == 4, "arr has %d elements", vj_len(d, arr));
	CHECK(vj_u64(d, vj_at(d, arr, 0), &u) == 0 && u == 10, "arr[0]");
	CHECK(vj_get_u64(d, vj_at(d, arr, 1), "x", &u) == 0 && u == 1, "arr[1].x");
	CHECK(vj_len(d, vj_at(d, arr, 2)) == 2, "arr[2] has 2 elements");
	CHECK(vj_u64(d, vj_at(d, vj_at(d, arr, 2), 1), &u) == 0 && u == 3, "arr[2][1]");
	CHECK(vj_str(d, vj_at(d, arr, 3), buf, sizeof buf) == 0 && strcmp(buf, "s") == 0, "arr[3]");
	CHECK(vj_at(d, arr, 4) == -1, "arr[4]");
	CHECK(vj_at(d, arr, -1) == -1, "arr[-1]");
	CHECK(vj_at(d, 0, 0) == -1, "vj_at on an object");
	CHECK(vj_get(d, arr, "x") == -1, "vj_get on an array");

	CHECK(vj_get_str(d, vj_get(d, vj_get(d, 0, "nested"), "a"), "b", buf, sizeof buf) == 0 &&
		      strcmp(buf, "deep") == 0,
	      "nested.a.b = %s", buf);
	CHECK(vj_get_str(d, vj_get(d, vj_get(d, 0, "missing"), "a"), "b", buf, sizeof buf) == -EINVAL,
	      "a chain through a missing key");
	CHECK(vj_get_u64(d, 0, "esc\"key", &u) == 0 && u == 5, "an escaped key");
	CHECK(vj_get_u64(d, 0, "uA", &u) == 0 && u == 6, "a \\u-escaped key");
	CHECK(vj_get_u64(d, 0, "dup", &u) == 0 && u == 1, "the first of duplicate keys");
	CHECK(vj_get(d, 0, "nam") == -1, "a prefix of a key");
	CHECK(vj_get(d, 0, "name2") == -1, "a key longer than any");
	CHECK(vj_get(d, 0, "") == -1, "the empty key");
	CHECK(vj_get(d, 0, "NAME") == -1, "keys are case-sensitive");
	CHECK(vj_get(d, 0, NULL) == -1, "a NULL key");

	/* Token indices out of range and -1 everywhere. */
	CHECK(vj_get(d, -1, "n") == -1 && vj_get(d, d->ntok, "n") == -1, "vj_get out of range");
	CHECK(vj_len(d, -1) == -1 && vj_len(d, d->ntok) == -1, "vj_len out of range");
	CHECK(vj_len(d, vj_get(d, 0, "n")) == -1, "vj_len of a number");
	CHECK(vj_u64(d, -1, &u) == -EINVAL && vj_i64(d, d->ntok, &i) == -EINVAL, "scalars out of range");
	CHECK(vj_bool(d, -1, &b) == -EINVAL, "vj_bool(-1)");
	CHECK(vj_str(d, -1, buf, sizeof buf) == -EINVAL && buf[0] == '\0', "vj_str(-1)");
	size_t n = 1;
	CHECK(vj_b64(d, -1, (uint8_t *)buf, sizeof buf, &n) == -EINVAL && n == 0, "vj_b64(-1)");
	done(&x);

	/* A key with an escaped NUL is not the key that ends there. */
	parse(&x, "{\"a\\u0000\":1,\"a\\u0000b\":2}");
	char *key = malloc(2); /* exactly "a" and its NUL: a read past it is caught */
	if (key == NULL)
		exit(2);
	memcpy(key, "a", 2);
	CHECK(x.rc == 0 && vj_get(&x.d, 0, key) == -1, "a key with a NUL matched \"a\"");
	free(key);
	done(&x);

	struct vj_doc empty = { 0 };
	CHECK(vj_get(&empty, 0, "a") == -1 && vj_len(NULL, 0) == -1, "lookups in no document");
}

static void test_str(void)
{
	static const struct {
		const char *json, *want;
	} cases[] = {
		{ "\"plain\"", "plain" },
		{ "\"\"", "" },
		{ "\"a\\nb\\\"c\\\\d\\/e\\b\\f\\r\\t\"", "a\nb\"c\\d/e\b\f\r\t" },
		{ "\"\\u0041\\u00e9\\u20ac\"", "A\xc3\xa9\xe2\x82\xac" },
		{ "\"\\u00E9\"", "\xc3\xa9" },
		{ "\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80" },
		{ "\"\\ud800x\"", "\xef\xbf\xbdx" },      /* lone high surrogate */
		{ "\"\\udc00\"", "\xef\xbf\xbd" },        /* lone low surrogate */
		{ "\"\\ud800\\u0041\"", "\xef\xbf\xbd" "A" }, /* high, then not a low one */
		{ "\"\\ud800\"", "\xef\xbf\xbd" },        /* high at the end */
		{ "\"\\u003c\\u003e\\u0026\\u2028\"", "<>&\xe2\x80\xa8" }, /* what Go's encoder escapes */
		{ "\"caf\xc3\xa9\"", "caf\xc3\xa9" },
	};
	char buf[64];

	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		struct doc x;
		parse(&x, cases[k].json);
		CHECK(x.rc == 0, "parse(%s) = %d", cases[k].json, x.rc);
		int r = vj_str(&x.d, 0, buf, sizeof buf);
		CHECK(r == 0 && strcmp(buf, cases[k].want) == 0, "vj_str(%s) = %d, \"%s\"", cases[k].json, r, buf);
		/* Every buffer shorter than the string and its NUL is -ENOSPC. */
		size_t need = strlen(cases[k].want) + 1;
		for (size_t cap = 0; cap < need; cap++) {
			char *small = malloc(cap ? cap : 1);
			if (small == NULL)
				exit(2);
			r = vj_str(&x.d, 0, small, cap);
			CHECK(r == -ENOSPC, "vj_str(%s) into %zu bytes = %d, want -ENOSPC", cases[k].json, cap, r);
			CHECK(cap == 0 || small[0] == '\0', "vj_str(%s) into %zu bytes left no empty string",
			      cases[k].json, cap);
			free(small);
		}
		char *exact = malloc(need);
		if (exact == NULL)
			exit(2);
		r = vj_str(&x.d, 0, exact, need);
		CHECK(r == 0 && strcmp(exact, cases[k].want) == 0, "vj_str(%s) into exactly %zu bytes = %d",
		      cases[k].json, need, r);
		free(exact);
		done(&x);
	}

	struct doc x;
	parse(&x, "[\"a\\u0000b\"]");
	CHECK(vj_str(&x.d, vj_at(&x.d, 0, 0), buf, sizeof buf) == -EINVAL, "a NUL in a string");
	CHECK(vj_str(&x.d, 0, buf, sizeof buf) == -EINVAL, "an array as a string");
	CHECK(vj_str(&x.d, vj_at(&x.d, 0, 0), NULL, 0) == -ENOSPC, "no buffer");
	done(&x);
}

static void test_b64(void)
{
	static const struct {
		const char *json;
		const char *want; /* NULL: invalid */
		size_t len;
	} cases[] = {
		{ "\"\"", "", 0 },
		{ "null", "", 0 },
		{ "\"Zg==\"", "f", 1 },
		{ "\"Zm8=\"", "fo", 2 },
		{ "\"Zm9v\"", "foo", 3 },
		{ "\"Zm9vYg==\"", "foob", 4 },
		{ "\"Zm9vYmE=\"", "fooba", 5 },
		{ "\"Zm9vYmFy\"", "foobar", 6 },
		{ "\"AP8=\"", "\x00\xff", 2 },
		{ "\"+/+/\"", "\xfb\xff\xbf", 3 },
		{ "\"\\/w==\"", "\xff", 1 },             /* an escaped '/' */
		{ "\"Zm9v\\nYmFy\\r\\n\"", "foobar", 6 }, /* line breaks are skipped */
		{ "\"Zh==\"", "f", 1 },                  /* non-zero trailing bits, as Go accepts */
		{ "\"Zg\"", NULL, 0 },
		{ "\"Zg=\"", NULL, 0 },
		{ "\"Z===\"", NULL, 0 },
		{ "\"Z\"", NULL, 0 },
		{ "\"=\"", NULL, 0 },
		{ "\"====\"", NULL, 0 },
		{ "\"Zm9v=\"", NULL, 0 },
		{ "\"Zm9=v\"", NULL, 0 },
		{ "\"Zg==Zg==\"", NULL, 0 },
		{ "\"Zm8=Zm8=\"", NULL, 0 },
		{ "\"Zm8=Zm9v\"", NULL, 0 },
		{ "\"Zg==x\"", NULL, 0 },
		{ "\"Zm8==\"", NULL, 0 },
		{ "\"Zm9-\"", NULL, 0 },
		{ "\"Zm9_\"", NULL, 0 },
		{ "\"Zm 9v\"", NULL, 0 },
		{ "\"\\u00e9AAA\"", NULL, 0 },
		{ "12", NULL, 0 },
		{ "true", NULL, 0 },
		{ "[]", NULL, 0 },
	};
	uint8_t buf[16];

	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		struct doc x;
		size_t n = 99;
		parse(&x, cases[k].json);
		CHECK(x.rc == 0, "parse(%s) = %d", cases[k].json, x.rc);
		int r = vj_b64(&x.d, 0, buf, sizeof buf, &n);
		if (cases[k].want == NULL) {
			CHECK(r == -EINVAL && n == 0, "vj_b64(%s) = %d (%zu bytes), want -EINVAL", cases[k].json, r, n);
		} else {
			CHECK(r == 0 && n == cases[k].len && memcmp(buf, cases[k].want, n) == 0,
			      "vj_b64(%s) = %d, %zu bytes", cases[k].json, r, n);
			/* Too small a buffer is -ENOSPC, never an overflow. */
			for (size_t cap = 0; cap < cases[k].len; cap++) {
				uint8_t *small = malloc(cap ? cap : 1);
				if (small == NULL)
					exit(2);
				r = vj_b64(&x.d, 0, cap ? small : NULL, cap, &n);
				CHECK(r == -ENOSPC, "vj_b64(%s) into %zu bytes = %d, want -ENOSPC", cases[k].json, cap, r);
				free(small);
			}
		}
		done(&x);
	}

	/* All 256 byte values. */
	static const char all[] =
		"\"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4"
		"OTo7PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3Bx"
		"cnN0dXZ3eHl6e3x9fn+AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmq"
		"q6ytrq+wsbKztLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj"
		"5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7/P3+/w==\"";
	struct doc x;
	uint8_t big[256];
	size_t n = 0;
	parse(&x, all);
	int r = vj_b64(&x.d, 0, big, sizeof big, &n);
	int ok = r == 0 && n == 256;
	for (size_t k = 0; ok && k < 256; k++)
		ok = big[k] == k;
	CHECK(ok, "all 256 bytes: %d, %zu bytes", r, n);
	done(&x);
}

static void test_escape(void)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "plain", "\"plain\"" },
		{ "", "\"\"" },
		{ "a\"b\\c\n\x01\x1f\t\r\b\f", "\"a\\\"b\\\\c\\n\\u0001\\u001f\\t\\r\\b\\f\"" },
		{ "/caf\xc3\xa9\x7f", "\"/caf\xc3\xa9\x7f\"" },
	};
	char buf[128];

	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		size_t want = strlen(cases[k].want);
		int r = vj_escape(buf, sizeof buf, cases[k].in);
		CHECK(r == (int)want && strcmp(buf, cases[k].want) == 0, "vj_escape(%s) = %d, %s", cases[k].in, r, buf);
		for (size_t cap = 0; cap <= want; cap++) {
			char *small = malloc(cap ? cap : 1);
			if (small == NULL)
				exit(2);
			r = vj_escape(cap ? small : NULL, cap, cases[k].in);
			CHECK(r == -ENOSPC, "vj_escape(%s) into %zu bytes = %d, want -ENOSPC", cases[k].in, cap, r);
			free(small);
		}
	}
	CHECK(vj_escape(buf, sizeof buf, NULL) == -EINVAL, "vj_escape(NULL)");

	/* Every byte but NUL survives escaping and reading back. */
	char in[256], out[256], json[1600];
	for (int k = 0; k < 255; k++)
		in[k] = (char)(k + 1);
	in[255] = '\0';
	int r = vj_escape(json, sizeof json, in);
	CHECK(r > 0, "vj_escape(every byte) = %d", r);
	struct doc x;
	parse_n(&x, json, r > 0 ? (size_t)r : 0);
	CHECK(x.rc == 0, "parse(vj_escape(every byte)) = %d", x.rc);
	CHECK(vj_str(&x.d, 0, out, sizeof out) == 0 && memcmp(in, out, sizeof in) == 0, "every byte round trip");
	done(&x);
}

/* Documents none of whose proper prefixes is a document. */
static const char *truncatable[] = {
	lookup_doc,
	"{\"a\":1}",
	"[1,\"x\",true,false,null,{},[]]",
	"\"\\u00e9\\ud83d\\ude00\\n\"",
	"{\"handle\":3,\"type\":1,\"qpn\":17,\"reason\":\"retry exceeded\"}",
	"{\"data\":\"Zm9vYmFy\",\"list\":[{\"a\":[[],{}]},-1.5e-3]}",
	"[[[[[[[[]]]]]]]]",
};

static void test_truncation(void)
{
	for (size_t k = 0; k < sizeof truncatable / sizeof truncatable[0]; k++) {
		const char *s = truncatable[k];
		size_t len = strlen(s);
		struct doc x;
		parse_n(&x, s, len);
		CHECK(x.rc == 0, "parse(%s) = %d", s, x.rc);
		done(&x);
		for (size_t n = 0; n < len; n++) {
			parse_n(&x, s, n);
			CHECK(x.rc == -EINVAL, "parse of the first %zu bytes of %s = %d, want -EINVAL", n, s, x.rc);
			done(&x);
		}
	}
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Every accessor on every token of a parsed document: none may fail badly. */
static void exercise(const struct vj_doc *d)
{
	char s[32];
	uint8_t b[32];
	uint64_t u;
	int64_t i;
	int v;
	size_t n;

	for (int t = -1; t <= d->ntok; t++) {
		(void)vj_str(d, t, s, sizeof s);
		(void)vj_str(d, t, s, 3);
		(void)vj_b64(d, t, b, sizeof b, &n);
		(void)vj_b64(d, t, b, 2, &n);
		(void)vj_u64(d, t, &u);
		(void)vj_i64(d, t, &i);
		(void)vj_bool(d, t, &v);
		for (int k = -1; k <= vj_len(d, t); k++)
			(void)vj_at(d, t, k);
		(void)vj_get(d, t, "a");
		(void)vj_get(d, t, "");
	}
}

static void test_random(void)
{
	static const char alphabet[] = "{}[]:,\"\\/u0123456789abefnrtlsE+-. \naZ=\xc3\xa9";
	char buf[96];
	int parsed = 0;

	for (int round = 0; round < 50000; round++) {
		size_t len = rnd() % sizeof buf;
		for (size_t k = 0; k < len; k++)
			buf[k] = round % 8 == 0 ? (char)rnd() : alphabet[rnd() % (sizeof alphabet - 1)];
		struct doc x;
		parse_n(&x, buf, len);
		CHECK(x.rc == 0 || x.rc == -EINVAL, "random document: %d", x.rc);
		if (x.rc == 0) {
			parsed++;
			CHECK(x.d.ntok > 0 && x.d.tok[0].span == x.d.ntok, "random document: root spans %d of %d",
			      x.d.tok[0].span, x.d.ntok);
			exercise(&x.d);
		}
		done(&x);
	}

	/* Single-byte mutations of valid documents. */
	for (size_t k = 0; k < sizeof truncatable / sizeof truncatable[0]; k++) {
		size_t len = strlen(truncatable[k]);
		char *m = malloc(len);
		if (m == NULL)
			exit(2);
		for (size_t pos = 0; pos < len; pos++) {
			for (int c = 0; c < 256; c += 7) {
				memcpy(m, truncatable[k], len);
				m[pos] = (char)c;
				struct doc x;
				parse_n(&x, m, len);
				CHECK(x.rc == 0 || x.rc == -EINVAL, "mutated document: %d", x.rc);
				if (x.rc == 0)
					exercise(&x.d);
				done(&x);
			}
		}
		free(m);
	}
	printf("json_test: %d of 50000 random documents parsed\n", parsed);
}

int main(void)
{
	test_valid();
	test_invalid();
	test_depth();
	test_lookup();
	test_str();
	test_b64();
	test_escape();
	test_truncation();
	test_random();
	if (failures) {
		fprintf(stderr, "json_test: %d failures\n", failures);
		return 1;
	}
	printf("json_test: ok\n");
	return 0;
}
