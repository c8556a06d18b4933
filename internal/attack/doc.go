// Package attack is vrdma's standing adversarial suite. Its tests replay,
// as an attacker would, the attacks an outside review ran against the
// daemons, on hosts made of network namespaces (package netns) running real
// `vrdma daemon` processes, and assert what happens now:
//
//   - hijack: a third host announces another host's addresses (or link ID)
//     on the TCP channel, plaintext and with a certificate of its own
//     making; it gets nothing, and the traffic between the real hosts goes
//     on untouched (hijack_test.go);
//   - hello flood: thousands of hellos with fresh link IDs; the daemon's
//     memory and threads stay bounded (flood_test.go);
//   - slowloris on the TCP channel's and the connection manager's ports:
//     idle connections from many sources; a legitimate daemon still gets
//     through (slowloris_test.go);
//   - CQ and session exhaustion by one tenant; another tenant still works
//     and the daemon survives (exhaust_test.go);
//   - another tenant attaching to, deleting or joining the trust group of
//     an instance (tenant_test.go);
//   - writes to the switch's etcd from another uid and from another host
//     without the switch's certificate (etcd_test.go);
//   - registrations whose segment lists lie about their memfds (sizes,
//     seals, descriptors that are no memfds, more or fewer than listed, a
//     terabyte of sparse memfds): each refused with what is wrong, the
//     daemon serving on (segments_test.go);
//   - kill -9 of a daemon under traffic: the programs on it stop with a
//     clear error instead of spinning (crash_test.go);
//   - a libibverbs.so.1 planted by another uid in a shared guest-library
//     cache, or altered in the user's own: root's `vrdma guest build
//     --out` and `vrdma run` refuse it and its constructor never runs
//     (cache_test.go; root, a C compiler and ibv_devices, no namespaces).
//
// Every other test needs root, iproute2 and network namespaces, and skips with a
// message without them; CI runs them as root. Every attack is bounded in
// count and time and sends traffic only inside the namespaces it made.
// Tenants other than root run as uids 4001, 4002 and 65534 (processes of
// this test binary, re-executed; child_test.go).
package attack
