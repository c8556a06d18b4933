// Package switchagent is the daemon's switch agent: its membership of the
// distributed switch kept in etcd (package fabric). It registers the host,
// its uplinks and the daemon's instances, watches the other hosts, and
// routes the engine's packets between them.
//
// An Agent owns, once it has joined:
//
//   - the store: an etcd member embedded in the daemon (STATE-DIR/etcd, on
//     a private socket, its peers under mutual TLS) or the client of an
//     existing cluster;
//   - the TCP channel (package tcplink), attached to the engine as the link
//     called TCPLinkName;
//   - the host record (Record: identity, addresses, uplinks, the channel's
//     and the connection manager's endpoints) under the daemon's lease,
//     republished when the links change and registered again, with the
//     subnet manager's candidacy, when the lease ends under it;
//   - the watch on the other hosts, which keeps the route table and fails
//     the QPs towards a host that leaves;
//   - the route table, the engine's router: per destination GID, rdma
//     between RDMA uplinks when path selection (package pathsel) says so,
//     the TCP channel otherwise, counted and logged;
//   - the authorizer of connections between daemons (Authorize: the host a
//     certificate names, or on an insecure switch the host an address
//     belongs to, live and announcing only its own addresses), against
//     the host records;
//   - the instances' records (PublishInstance, UnpublishInstance);
//   - the LIDs the subnet manager assigned: this host's adapters' (LocalLID)
//     and the resolution of another host's to a GID of that host
//     (ResolveLID; docs/design/lid-addressing.md).
//
// What it needs of the daemon is a Host: the engine's SetRouter,
// FailPeers, AttachLink and RemoveLink, the host's RDMA links (Uplinks)
// and word when the LIDs change (LIDsChanged); and, in Local, the host's
// name, the state directory and a logger. The daemon decodes the switch's
// commands and reads the records through Fabric; it decides where its
// listener listens (with Config.SingleHost and HostAddrs). Authorize
// refuses everything until Join has succeeded.
//
// Lock order: the agent's own locks, then the daemon's links' (Uplinks is
// called holding the agent's); the daemon calls the agent holding none of
// its locks.
//
//	a, err := switchagent.New(cfg, switchagent.Local{HostName: "a", StateDir: "/var/lib/vrdma", Host: host})
//	if err != nil { ... }
//	if err := a.Join(); err != nil { ... } // on an error, it has left again
//	defer a.Close()
//	err = a.PublishInstance(switchagent.Instance{Name: "vm1", Adapters: adapters})
//
// docs/design/control-plane.md describes the store, path-routing.md the
// routes and the lease, trust.md who gets in.
package switchagent
