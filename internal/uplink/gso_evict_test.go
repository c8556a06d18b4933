package uplink

import "testing"

// Past gsoMaxSockets flows, a new flow's socket replaces one other, not
// every one of them.
func TestGSOEvictOne(t *testing.T) {
	g := &gsoSender{socks: map[gsoKey]*gsoSock{}}
	for i := range gsoMaxSockets {
		g.socks[gsoKey{sport: uint16(0xC000 + i)}] = &gsoSock{} // no socket: a remembered refusal
	}
	g.evictOne()
	if len(g.socks) != gsoMaxSockets-1 {
		t.Fatalf("%d sockets left of %d after evicting one", len(g.socks), gsoMaxSockets)
	}
	g.socks = map[gsoKey]*gsoSock{}
	g.evictOne() // nothing to evict: no panic
	if len(g.socks) != 0 {
		t.Fatalf("an empty map has %d entries after evictOne", len(g.socks))
	}
}
