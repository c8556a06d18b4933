/*
 * cma_loopback.c: what a bind to a loopback address gives an id.
 *
 * The kernel's rdma_cm takes 127.0.0.1 and ::1 as it takes the wildcard
 * (cma_any_addr): the id gets no device until it listens (on every device)
 * or resolves. Programs rely on it: libfabric's verbs provider binds
 * "localhost" and, when the id has no device, publishes the addresses of
 * the interfaces whose addresses are in the adapters' GID tables rather
 * than 127.0.0.1. On the kernel every RoCE GID is an interface's address;
 * a vrdma adapter with no link has GIDs of its own that no interface has,
 * and then libfabric would fall back to AF_IB addresses, which its RDM
 * endpoints cannot use. So a loopback bind leaves the id without a device
 * when some adapter's GID is an address of one of this host's interfaces
 * (as on the kernel), and binds it to the first adapter otherwise (where
 * no interface address could stand for the adapter anyway).
 */
#include "cma.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>

/* Whether gid is one of the adapters' GIDs. */
static int adapter_gid(const uint8_t gid[16])
{
	for (int i = 0; i < cma_ndevs; i++)
		for (int j = 0; j < cma_devs[i].ngids; j++)
			if (memcmp(cma_devs[i].gids[j].raw, gid, 16) == 0)
				return 1;
	return 0;
}

int cma_loopback_has_no_device(void)
{
	struct ifaddrs *ifs = NULL;
	if (getifaddrs(&ifs) != 0)
		return 0;
	int found = 0;
	for (struct ifaddrs *i = ifs; i != NULL && !found; i = i->ifa_next) {
		uint8_t gid[16];
		if (i->ifa_addr == NULL || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
			continue;
		if (cma_sa_is_loopback(i->ifa_addr) || cma_sa_gid(i->ifa_addr, gid) < 0)
			continue;
		found = adapter_gid(gid);
	}
	freeifaddrs(ifs);
	return found;
}
