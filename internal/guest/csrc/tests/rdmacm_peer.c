/*
 * rdmacm_peer.c: librdmacm against a daemon that misbehaves. Not a
 * standalone test: the Go test TestRdmacmAgainstAHostileDaemon runs it on a
 * proxy in front of a real daemon (argv[1] is unused; VRDMA_SOCKET names
 * the proxy) and checks its exit status. The proxy, on this program's first
 * cm_listen, sends events that cannot be (a reply, ESTABLISHED and
 * DISCONNECTED for a listener, a request for a listener that does not
 * exist, a rejection of an unknown connection, a body that is not JSON, a
 * text beyond its bound) before the daemon's answer; it answers every
 * cm_connect itself with "not found" (no way to the peer's connection
 * manager); on the second cm_listen it cuts the connection, as a daemon
 * that goes away.
 *
 * What must happen: none of the bad events reaches the application (the
 * channel stays empty); the connect that finds no way succeeds and its id
 * gets UNREACHABLE, as rdma-core's gets it when its request times out
 * (rping's CM thread ends the program on it); after the cut, every id on the device gets
 * DEVICE_REMOVAL, once, the channel does not spin, and rdma_get_cm_event
 * then fails with EIO (blocking or not) instead of waiting for ever.
 */
#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static struct sockaddr_in loopback(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

int main(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *l1, *c, *l2;
	struct rdma_cm_event *ev;

	alarm(60); /* a hang guard */
	if (ch == NULL) {
		perror("rdma_create_event_channel");
		return 2;
	}
	int fl = fcntl(ch->fd, F_GETFL);
	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
	struct sockaddr_in a = loopback(0);
	if (rdma_create_id(ch, &l1, NULL, RDMA_PS_TCP) || rdma_bind_addr(l1, (struct sockaddr *)&a) ||
	    rdma_listen(l1, 4)) {
		perror("the first listener");
		return 2;
	}
	errno = 0;
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN, "an event reached the application: %s",
	      errno == 0 ? rdma_event_str(ev->event) : strerror(errno));

	struct sockaddr_in dst = loopback(7);
	if (rdma_create_id(ch, &c, NULL, RDMA_PS_TCP) || rdma_resolve_addr(c, NULL, (struct sockaddr *)&dst, 1000)) {
		perror("resolving");
		return 2;
	}
	CHECK(rdma_get_cm_event(ch, &ev) == 0 && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED && ev->id == c,
	      "want ADDR_RESOLVED");
	rdma_ack_cm_event(ev);
	CHECK(rdma_resolve_route(c, 1000) == 0, "rdma_resolve_route: %s", strerror(errno));
	CHECK(rdma_get_cm_event(ch, &ev) == 0 && ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED, "want ROUTE_RESOLVED");
	rdma_ack_cm_event(ev);
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC };
	qa.cap.max_send_wr = qa.cap.max_recv_wr = qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	CHECK(rdma_create_qp(c, NULL, &qa) == 0, "rdma_create_qp: %s", strerror(errno));
	CHECK(rdma_connect(c, NULL) == 0, "a connect with no way to the peer: %s, want the failure as an event",
	      strerror(errno));
	CHECK(rdma_get_cm_event(ch, &ev) == 0 && ev->event == RDMA_CM_EVENT_UNREACHABLE && ev->id == c &&
		      ev->status < 0,
	      "want UNREACHABLE with a negative status");
	rdma_ack_cm_event(ev);
	rdma_destroy_qp(c);

	if (rdma_create_id(ch, &l2, NULL, RDMA_PS_TCP) || rdma_bind_addr(l2, (struct sockaddr *)&a)) {
		perror("the second id");
		return 2;
	}
	errno = 0;
	CHECK(rdma_listen(l2, 4) == -1 && errno == EIO, "listening with the daemon gone: errno %d", errno);

	int seen[3] = { 0 };
	struct rdma_cm_id *ids[3] = { l1, c, l2 };
	fcntl(ch->fd, F_SETFL, fl);
	for (int i = 0; i < 3; i++) {
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };
		if (poll(&p, 1, 20000) != 1 || rdma_get_cm_event(ch, &ev) != 0) {
			CHECK(0, "event %d of 3 did not come", i + 1);
			break;
		}
		CHECK(ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL, "event %s, want DEVICE_REMOVAL", rdma_event_str(ev->event));
		for (int j = 0; j < 3; j++)
			if (ev->id == ids[j])
				seen[j]++;
		rdma_ack_cm_event(ev);
	}
	CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1, "DEVICE_REMOVAL for the ids: %d %d %d, want one each",
	      seen[0], seen[1], seen[2]);
	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	CHECK(poll(&p, 1, 0) == 0, "the channel polls readable with nothing to read (a dead socket left in it)");
	errno = 0;
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EIO, "after the removal: errno %d, want EIO", errno);
	/* and a blocking call does not block: nothing can come any more */
	fcntl(ch->fd, F_SETFL, fl);
	errno = 0;
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EIO, "blocking, after the removal: errno %d, want EIO",
	      errno);
	rdma_destroy_id(l1);
	rdma_destroy_id(c);
	rdma_destroy_id(l2);
	rdma_destroy_event_channel(ch);
	if (failures) {
		fprintf(stderr, "rdmacm_peer: %d failures\n", failures);
		return 1;
	}
	printf("rdmacm_peer: ok\n");
	return 0;
}
