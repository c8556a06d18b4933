// Package connmgr is the daemon's connection manager, rdma_cm's model
// between vrdma daemons: sessions listen on ports of a host-wide port
// space, dial an adapter's address and port, accept or reject with private
// data and disconnect, and hear of the outcome through events; the
// daemons exchange IBTA CM MADs on QP1 between hosts, as Linux rdma_cm
// does (Config.GSI: gsi.go, mad.go, retry.go, sidr.go — retransmission,
// duplicates, MRA, TIMEWAIT, SIDR for UD), the messages of package cm
// through an in-process queue between the adapters of one host, and run
// the IBTA CM state machine on connection ids.
//
// The manager (a thin API over parts of one concern each: manager.go)
// owns the MAD transport (a bounded queue between the GSI handler and the
// goroutine that runs what arrives, another before the sender), the
// in-process peer, the connections with their timers, and the sessions'
// listeners and connections by the ids the library gave them. No call
// waits for a peer: what a command starts ends with an event.
//
// What it needs of the daemon is small: a Host that says whether a GID is
// local, and for every session a Session (its adapter, its QPs by handle
// under its lock, an Emit that queues an event for its client without
// blocking, whether its client has stopped reading them, and a quota its
// listeners and connections are charged to, so that what a tenant makes
// the manager hold is bounded by it). A request's source GID must be its
// packet's, and not this host's. The daemon decodes the commands
// (proto.OpCMListen ...) and calls the Manager's method of the same name
// with the session's lock held; when a session ends it calls CloseSession.
//
//	m, err := connmgr.New(connmgr.Config{Host: host, HostName: "a", GSI: host}) // host: *engine.Host
//	if err != nil { ... }
//	defer m.Close()
//	port, err := m.Listen(s, proto.CMListenReq{ID: 1, Port: 7000}) // s: a Session
//	// s.Emit gets a proto.CMEvent of type CMEventRequest for each request
//
// docs/design/connection-manager.md says why it is built this way.
package connmgr
