// Package netns builds multi-host test topologies out of Linux network
// namespaces: each "host" is a namespace with one Ethernet-like interface,
// eth0, joined to the others by veth pairs (two hosts) or through a bridge
// (three or more), with an IPv4 address and a ready IPv6 link-local address.
// A test can run commands and Go code inside a host, start a real
// `vrdma daemon` process there, and make the RoCEv2 traffic (UDP port 4791)
// of a host lossy with nftables.
//
// It needs root and iproute2 (`ip`); SetLoss also needs nftables (`nft`).
// Tests that use it call Require (New does) and skip without them; CI runs
// them as root.
//
//	top := netns.New(t, 2)
//	h1, h2 := top.Hosts[0], top.Hosts[1]
//	d1, d2 := h1.StartDaemon(t), h2.StartDaemon(t)
//	out := d1.Vrdma(t, "devices")
//	h2.SetLoss(t, 10) // 10 % of h2's UDP 4791 datagrams vanish, both ways
//	err := h1.Do(func() error { _, err := net.Dial("udp", h2.IPv4.String()+":4791"); return err })
//
// Everything New and SetLoss create is deleted when the test ends, whether it
// passed or not: the namespaces (with their links and nftables tables) and
// the daemon processes, which are stopped by their PIDs. An existing
// namespace, made by something else, can be used as a Host through Existing.
package netns
