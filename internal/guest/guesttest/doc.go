// Package guesttest runs Debian's unmodified verbs programs (ibverbs-utils'
// pingpongs, perftest) on vrdma adapters through the guest library, for
// tests between network-namespace hosts: it builds the library, starts a
// program in a host's namespace against a daemon's socket, runs a server
// and its client as a pair, and reads the results the programs print.
//
//	lib := guesttest.Library(t)                    // built once into t.TempDir()
//	guesttest.RequirePrograms(t, "ibv_rc_pingpong")
//	srv := guesttest.Program{Host: ha, Lib: lib, Socket: da.Socket}
//	cli := guesttest.Program{Host: hb, Lib: lib, Socket: db.Socket}
//	r := guesttest.RunPair(t, srv, cli, guesttest.PingpongPort, "ibv_rc_pingpong", "-g", "1")
//	// r.ServerOut, r.ClientOut; the test has failed if either exited non-zero
//	pp, err := guesttest.ParsePingpong(r.ClientOut)
//
// The programs load the library through LD_LIBRARY_PATH, set with env(1)
// inside the namespace (`ip netns exec NS env LD_LIBRARY_PATH=... TOOL`) so
// that only the program sees it.
package guesttest
