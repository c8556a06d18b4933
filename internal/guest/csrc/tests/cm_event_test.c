/*
 * cm_event_test.c: decoding the daemon's connection manager events
 * (cm_event.c). The daemon is trusted less than fully: a table of bodies
 * that must decode to given fields, one of bodies that must be refused
 * whole (a field of the wrong type, out of its range, too long), and a
 * mutation run over valid bodies (flipped, cut and duplicated bytes) that
 * must never crash the decoder nor let a field out of its range.
 */
#include "vrdma.h"
#include "vrdma_private.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static const char *const valid[] = {
	"{\"type\":1,\"id\":2147483648,\"listener\":1,\"qp_type\":2,\"gid\":\"/oAAAAAAAAAAAAAAAAAAAQ==\",\"qpn\":16777215,"
	"\"psn\":1,\"mtu\":5,\"rd_atomic\":16,\"sgid_index\":1,\"local_addr\":\"AAAAAAAAAAAAAP//fwAAAQ==\","
	"\"local_port\":65535,\"remote_addr\":\"AAAAAAAAAAAAAP//fwAAAQ==\",\"remote_port\":1,\"private_data\":\"aGk=\"}",
	"{\"type\":2,\"id\":1,\"qpn\":9,\"psn\":7,\"mtu\":3,\"rd_atomic\":4,\"qkey\":4294967295}",
	"{\"type\":3,\"id\":1}",
	"{\"type\":4,\"id\":5,\"reason\":28,\"text\":\"the application said no\",\"private_data\":null}",
	"{\"type\":8,\"id\":4294967295,\"unknown_field\":[1,2,{\"x\":3}]}",
	"{\"type\":2,\"id\":1,\"qpn\":9,\"psn\":7,\"local_psn\":0}",
	"{\"type\":2,\"id\":1,\"qpn\":9,\"psn\":7,\"local_psn\":16777215}",
};

struct bad {
	const char *body, *why;
};

static const struct bad invalid[] = {
	{ "", "empty" },
	{ "[]", "not an object" },
	{ "{\"id\":1}", "no type" },
	{ "{\"type\":0,\"id\":1}", "type 0" },
	{ "{\"type\":9,\"id\":1}", "type 9" },
	{ "{\"type\":2}", "no id" },
	{ "{\"type\":2,\"id\":4294967296}", "id beyond 32 bits" },
	{ "{\"type\":2,\"id\":-1}", "negative id" },
	{ "{\"type\":2,\"id\":\"1\"}", "id a string" },
	{ "{\"type\":1,\"id\":5,\"listener\":1}", "a request with an id of the library's range" },
	{ "{\"type\":2,\"id\":1,\"qpn\":16777216}", "QPN beyond 24 bits" },
	{ "{\"type\":2,\"id\":1,\"psn\":16777216}", "PSN beyond 24 bits" },
	{ "{\"type\":2,\"id\":1,\"local_psn\":16777216}", "local PSN beyond 24 bits" },
	{ "{\"type\":2,\"id\":1,\"local_psn\":\"1\"}", "local PSN a string" },
	{ "{\"type\":2,\"id\":1,\"mtu\":6}", "MTU beyond 4096" },
	{ "{\"type\":2,\"id\":1,\"rd_atomic\":256}", "rd_atomic beyond 8 bits" },
	{ "{\"type\":2,\"id\":1,\"qp_type\":256}", "qp_type beyond 8 bits" },
	{ "{\"type\":2,\"id\":1,\"sgid_index\":300}", "sgid_index beyond 8 bits" },
	{ "{\"type\":2,\"id\":1,\"local_port\":65536}", "port beyond 16 bits" },
	{ "{\"type\":4,\"id\":1,\"reason\":65536}", "reason beyond 16 bits" },
	{ "{\"type\":2,\"id\":1,\"gid\":\"AAAA\"}", "a GID of 3 bytes" },
	{ "{\"type\":2,\"id\":1,\"gid\":\"AAAAAAAAAAAAAAAAAAAAAAAA\"}", "a GID of 18 bytes" },
	{ "{\"type\":2,\"id\":1,\"local_addr\":\"!!!!\"}", "an address that is not base64" },
	{ "{\"type\":2,\"id\":1,\"gid\":5}", "a GID that is a number" },
	{ "{\"type\":4,\"id\":1,\"text\":5}", "text a number" },
	{ "{\"type\":4,\"id\":1,\"text\":\"a\\u0000b\"}", "text with a NUL" },
	{ "{\"type\":2,\"id\":1,\"qpn\":1.5}", "a fraction" },
	{ "{\"type\":2,\"id\":1", "truncated" },
};

/* A text of n 'x's as a JSON string field, and private data of n bytes. */
static void test_bounds(void)
{
	char body[4096], text[VRDMA_CM_TEXT_MAX + 2], b64[400];
	struct vrdma_cm_ev ev;

	memset(text, 'x', sizeof text - 1);
	text[VRDMA_CM_TEXT_MAX] = '\0';
	snprintf(body, sizeof body, "{\"type\":4,\"id\":1,\"text\":\"%s\"}", text);
	CHECK(vrdma_cm_event_parse(body, strlen(body), &ev) == 0 && strlen(ev.text) == VRDMA_CM_TEXT_MAX,
	      "a text of %d bytes (the bound) was refused", VRDMA_CM_TEXT_MAX);
	text[VRDMA_CM_TEXT_MAX] = 'x';
	text[VRDMA_CM_TEXT_MAX + 1] = '\0';
	snprintf(body, sizeof body, "{\"type\":4,\"id\":1,\"text\":\"%s\"}", text);
	CHECK(vrdma_cm_event_parse(body, strlen(body), &ev) == -EINVAL, "a text of %d bytes was accepted",
	      VRDMA_CM_TEXT_MAX + 1);
	/* 224 bytes of private data are 299 base64 characters and a '='; 225
	 * bytes are 300 characters. */
	memset(b64, 'A', 299);
	memcpy(b64 + 299, "=", 2);
	snprintf(body, sizeof body, "{\"type\":3,\"id\":1,\"private_data\":\"%s\"}", b64);
	CHECK(vrdma_cm_event_parse(body, strlen(body), &ev) == 0 && ev.private_len == VRDMA_CM_PRIVATE_MAX,
	      "private data of %d bytes (the bound) refused", VRDMA_CM_PRIVATE_MAX);
	memcpy(b64 + 299, "A", 2);
	snprintf(body, sizeof body, "{\"type\":3,\"id\":1,\"private_data\":\"%s\"}", b64);
	CHECK(vrdma_cm_event_parse(body, strlen(body), &ev) == -EINVAL, "private data of %d bytes accepted",
	      VRDMA_CM_PRIVATE_MAX + 1);
}

static void test_valid(void)
{
	struct vrdma_cm_ev ev;

	for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
		int r = vrdma_cm_event_parse(valid[i], strlen(valid[i]), &ev);
		CHECK(r == 0, "valid body %zu refused: %s", i, valid[i]);
	}
	CHECK(vrdma_cm_event_parse(valid[0], strlen(valid[0]), &ev) == 0 && ev.type == 1 && ev.id == 2147483648u &&
		      ev.listener == 1 && ev.qp_type == 2 && ev.qpn == 16777215 && ev.psn == 1 && ev.mtu == 5 &&
		      ev.rd_atomic == 16 && ev.sgid_index == 1 && ev.local_port == 65535 && ev.remote_port == 1 &&
		      ev.gid[0] == 0xfe && ev.gid[1] == 0x80 && ev.gid[15] == 1 && ev.local_addr[10] == 0xff &&
		      ev.local_addr[12] == 127 && ev.private_len == 2 && memcmp(ev.private_data, "hi", 2) == 0,
	      "the request's fields did not decode");
	CHECK(vrdma_cm_event_parse(valid[1], strlen(valid[1]), &ev) == 0 && ev.qkey == 4294967295u && ev.mtu == 3,
	      "the reply's fields did not decode");
	CHECK(vrdma_cm_event_parse(valid[3], strlen(valid[3]), &ev) == 0 && ev.reason == 28 &&
		      strcmp(ev.text, "the application said no") == 0 && ev.private_len == 0,
	      "the rejection's fields did not decode");
	/* A device CM's PSN: present (0 too) or absent, told apart. */
	CHECK(vrdma_cm_event_parse(valid[5], strlen(valid[5]), &ev) == 0 && ev.has_local_psn && ev.local_psn == 0,
	      "local_psn 0 did not decode as present");
	CHECK(vrdma_cm_event_parse(valid[6], strlen(valid[6]), &ev) == 0 && ev.has_local_psn && ev.local_psn == 0xffffff,
	      "local_psn 16777215 did not decode");
	CHECK(vrdma_cm_event_parse(valid[1], strlen(valid[1]), &ev) == 0 && !ev.has_local_psn,
	      "an event without local_psn decoded one");
}

static void test_invalid(void)
{
	struct vrdma_cm_ev ev;
	static const struct vrdma_cm_ev zero;

	for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
		memset(&ev, 0x5a, sizeof ev);
		int r = vrdma_cm_event_parse(invalid[i].body, strlen(invalid[i].body), &ev);
		CHECK(r == -EINVAL, "%s: accepted (%d): %s", invalid[i].why, r, invalid[i].body);
		CHECK(memcmp(&ev, &zero, sizeof ev) == 0, "%s: the refused event was not cleared", invalid[i].why);
	}
	CHECK(vrdma_cm_event_parse(NULL, 0, &ev) == -EINVAL, "NULL accepted");
}

/* Mutations of the valid bodies: the decoder must not crash (the
 * sanitizers watch) and what it accepts must be in range. */
static void test_mutations(void)
{
	char buf[2048];
	struct vrdma_cm_ev ev;
	unsigned seed = 12;
	int accepted = 0;

	for (int round = 0; round < 20000; round++) {
		const char *v = valid[(unsigned)rand_r(&seed) % (sizeof valid / sizeof valid[0])];
		size_t n = strlen(v);
		memcpy(buf, v, n);
		int edits = 1 + rand_r(&seed) % 4;
		for (int e = 0; e < edits; e++) {
			size_t at = (size_t)rand_r(&seed) % n;
			switch (rand_r(&seed) % 4) {
			case 0:
				buf[at] = (char)rand_r(&seed);
				break;
			case 1:
				n = at; /* cut */
				break;
			case 2:
				if (n + 8 < sizeof buf) { /* duplicate a stretch */
					size_t len = 1 + (size_t)rand_r(&seed) % 8;
					if (at + len > n)
						len = n - at;
					memmove(buf + at + len, buf + at, n - at);
					n += len;
				}
				break;
			default:
				buf[at] = "0123456789\"{}[],:-e."[rand_r(&seed) % 20];
				break;
			}
			if (n == 0)
				break;
		}
		if (vrdma_cm_event_parse(buf, n, &ev) == 0) {
			accepted++;
			CHECK(ev.type >= 1 && ev.type <= 8 && ev.qpn <= 0xffffff && ev.psn <= 0xffffff && ev.local_psn <= 0xffffff && ev.mtu <= 5 &&
				      ev.private_len <= VRDMA_CM_PRIVATE_MAX && strlen(ev.text) <= VRDMA_CM_TEXT_MAX,
			      "a mutation decoded out of range: %.*s", (int)n, buf);
		}
	}
	CHECK(accepted > 0, "no mutation decoded: the run tests only refusals");
}

int main(void)
{
	test_valid();
	test_invalid();
	test_bounds();
	test_mutations();
	if (failures) {
		fprintf(stderr, "cm_event_test: %d failures\n", failures);
		return 1;
	}
	printf("cm_event_test: ok\n");
	return 0;
}
