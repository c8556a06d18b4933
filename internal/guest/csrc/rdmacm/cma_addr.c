/*
 * cma_addr.c: socket addresses and the GIDs they are on vrdma adapters
 * (an adapter's GID table holds its IP addresses, IPv4 as ::ffff:a.b.c.d).
 */
#include "cma.h"

#include <arpa/inet.h>
#include <endian.h>
#include <infiniband/ib.h>
#include <netinet/in.h>
#include <string.h>

int cma_sa_gid(const struct sockaddr *sa, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (sa == NULL)
		return -1;
	switch (sa->sa_family) {
	case AF_INET: {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &in->sin_addr, 4);
		return 0;
	}
	case AF_INET6:
		memcpy(gid, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
		return 0;
	case AF_IB:
		memcpy(gid, &((const struct sockaddr_ib *)(const void *)sa)->sib_addr, 16);
		return 0;
	}
	return -1;
}

void cma_gid_sa(const uint8_t gid[16], uint16_t port, struct sockaddr_storage *out)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	memset(out, 0, sizeof *out);
	if (memcmp(gid, prefix, sizeof prefix) == 0) {
		struct sockaddr_in *in = (struct sockaddr_in *)out;
		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		memcpy(&in->sin_addr, gid + 12, 4);
		return;
	}
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons(port);
	memcpy(&in6->sin6_addr, gid, 16);
}

int cma_sa_is_any(const struct sockaddr *sa)
{
	if (sa == NULL || sa->sa_family == AF_UNSPEC)
		return 1; /* nothing bound */
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr);
	return 0;
}

int cma_sa_is_loopback(const struct sockaddr *sa)
{
	if (sa == NULL)
		return 0;
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr);
	return 0;
}

uint16_t cma_sa_port(const struct sockaddr *sa)
{
	if (sa == NULL)
		return 0;
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
	if (sa->sa_family == AF_IB)
		return (uint16_t)be64toh(((const struct sockaddr_ib *)(const void *)sa)->sib_sid);
	return 0;
}

void cma_sa_set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)(void *)sa)->sin_port = htons(port);
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)(void *)sa)->sin6_port = htons(port);
	else if (sa->sa_family == AF_IB) {
		/* The port is the service ID's low 16 bits (its port space
		 * above them stays); the ID is then exact, as the kernel's
		 * rdma_cm leaves it when it binds a port. */
		struct sockaddr_ib *ib = (struct sockaddr_ib *)(void *)sa;
		ib->sib_sid = htobe64((be64toh(ib->sib_sid) & ~(uint64_t)0xffff) | port);
		ib->sib_sid_mask = htobe64(UINT64_MAX);
	}
}

socklen_t cma_sa_len(const struct sockaddr *sa)
{
	if (sa == NULL)
		return 0;
	switch (sa->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	case AF_IB:
		return sizeof(struct sockaddr_ib);
	}
	return 0;
}

CMA_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return id == NULL ? 0 : htons(cma_sa_port(&id->route.addr.src_addr));
}

CMA_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id == NULL ? 0 : htons(cma_sa_port(&id->route.addr.dst_addr));
}
