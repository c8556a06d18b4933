// Package admit decides who gets in on the daemon's TCP listeners (the
// TCP channel, internal/tcplink, and the connection manager): how many
// connections may be in their handshake at once, whose identity a
// connection carries, and how refusals are logged without letting a flood
// flood the log.
//
// A Gate bounds the handshakes in flight, per source address and in all.
// A source that has Limits.PerSource handshakes in flight is refused its
// next; when Limits.Total are in flight, one is cut (its connection
// closed) to admit the new one: the oldest of those that have received
// nothing yet (WatchConn marks the first bytes), else the oldest. A
// daemon's handshake takes milliseconds and sends at once, so idle
// connections that hold slots are what gets cut, and they cannot lock
// legitimate peers out however fast they come back.
//
// An Authorizer names the peer of a connection once its TLS handshake (if
// any) and its greeting are done: from the remote address, the verified
// certificate chain and the addresses the peer announced it returns the
// identity (the host name the switch knows it by) or why the connection is
// refused. An Endpoint is where a resolver says a peer listens and whose
// identity is expected there. ServerTLS and ClientTLS prepare a tls.Config
// for either side: mutual TLS when ClientCAs are set, and, since endpoints
// are addresses while certificates name hosts, a client that verifies the
// server's chain without a name and leaves the name to the Authorizer.
//
// A LogLimit lets a few refusal lines a second through and counts the rest.
//
//	gate := admit.NewGate(admit.Limits{}) // 4 per source, 64 in all
//	for {
//		nc, _ := ln.Accept()
//		slot, err := gate.Enter(admit.SourceOf(nc.RemoteAddr()), func() { nc.Close() })
//		if err != nil {
//			logs.Log(log, slog.LevelWarn, "refused", "err", err)
//			nc.Close()
//			continue
//		}
//		go func() {
//			_ = nc.SetDeadline(time.Now().Add(admit.DefaultHandshakeTimeout))
//			err := handshake(admit.WatchConn(nc, slot)) // TLS, greeting, Authorizer
//			slot.Leave()
//			...
//		}()
//	}
package admit
