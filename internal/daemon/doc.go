// Package daemon is the host daemon: the backend of every vrdma adapter on
// its host. It owns the instances and their adapters, serves the command
// channel on a unix socket (one session per opened device), creates the
// shared rings and hands their descriptors to clients, and gives the data
// plane objects to the engine. When a session ends, for whatever reason,
// every object it created is destroyed and the QPs connected to its QPs go
// to the error state.
//
//	d, err := daemon.New(daemon.Config{SocketPath: "/run/vrdma/vrdma.sock"})
//	if err != nil { ... }
//	go d.Serve()
//	defer d.Close()
package daemon
