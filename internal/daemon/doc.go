// Package daemon is the host daemon: the backend of every vrdma adapter on
// its host. It owns the instances and their adapters, serves the command
// channel on a unix socket (one session per opened device), creates the
// shared rings and hands their descriptors to clients, and gives the data
// plane objects to the engine. When a session ends, for whatever reason,
// every object it created is destroyed and the QPs connected to its QPs go
// to the error state.
//
// Instances belong to a tenant (a uid and gid, from the creating session's
// SO_PEERCRED): only the owner and root attach to one, delete it or put it
// in a trust group; switch-wide commands are for root, the daemon's uid
// and an admin group. Every uid and every instance has limits on what it
// holds, which query_device advertises; the daemon keeps descriptors in
// reserve and never stops serving because a client ran something out
// (docs/design/tenants.md).
//
//	d, err := daemon.New(daemon.Config{SocketPath: "/run/vrdma/vrdma.sock"})
//	if err != nil { ... }
//	go d.Serve()
//	defer d.Close()
package daemon
