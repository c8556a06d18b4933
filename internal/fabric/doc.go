// Package fabric is the distributed switch's store: the records of the
// switch (port groups, hosts and their uplinks, instances and their
// adapters) kept in etcd, the hosts' liveness through leases, and the
// election of the subnet manager that assigns adapter identifiers (which
// are the adapters' LIDs) and QPN blocks.
//
// # One code path
//
// Everything runs on the small Store interface (store.go). EtcdStore is the
// real one, on the etcd v3 client; it talks to an external cluster (Dial,
// with ClientTLS for client certificates) or to a single-node etcd running
// inside the daemon (StartEmbedded, in the daemon's state directory, on
// loopback) — the same client code either way. MemStore implements the
// same semantics in memory, with leases on a FakeClock, for unit tests.
//
//	m, err := fabric.StartEmbedded(stateDir+"/etcd", fabric.EmbedOptions{})
//	st, err := m.Dial() // or fabric.Dial(endpoints, tlsConfig)
//	f, err := fabric.New(st, "sw0")
//	_, err = f.Init(ctx, fabric.Switch{})
//	err = f.PutPortGroup(ctx, fabric.PortGroup{Name: "pg0", VLAN: 10, MTU: 4096})
//
//	sess, err := st.NewSession(ctx, 5*time.Second) // the daemon's lease
//	id, err := fabric.LocalIdentity()
//	err = f.RegisterHost(ctx, fabric.Host{Name: "h1", Identity: id, ...}, sess)
//	events, err := f.WatchHosts(ctx, fabric.LivenessOptions{Trust: judge}) // joined/updated/gone, removed/refused
//	cand, err := f.Campaign(ctx, sess, "h1", 8, fabric.SMConfig{})
//
// # Keys
//
// All records are JSON under /vrdma/<switch>/ (keys.go has the layout).
// Host records and subnet-manager candidacies are bound to the daemon's
// lease: a daemon that dies disappears TTL later, and WatchHosts reports it
// gone after a further grace period, so that a blip tears nothing down.
//
// # Same host
//
// Identity (identity.go) decides whether two hosts are the same: machine
// id, boot id and network namespace all equal.
//
// # Subnet manager
//
// Candidates stand with a priority 0–15 (election.go). Only the best live
// one campaigns in a concurrency.Election, a holder yields to a better one,
// and a new holder re-validates every assignment before it keeps them up to
// date (assign.go, sm.go). FollowAssignments reports the assignments to
// the daemons, which take their adapters' LIDs from them and resolve
// other adapters' LIDs (docs/design/lid-addressing.md).
//
// Every validation error is a *ValidationError that names the field, the
// problem and the fix.
package fabric
