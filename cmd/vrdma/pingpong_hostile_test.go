package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
)

// TestPingpongServerGivenAnAddressThatLeadsNowhereEnds gives a pingpong
// server addresses that no pingpong sends: each must end the server with
// an error that says what was wrong, its objects released (serveOne checks
// that), never hang it.
func TestPingpongServerGivenAnAddressThatLeadsNowhereEnds(t *testing.T) {
	r := newPPRig(t)
	shortBounds(t)
	addr := func(qpn, psn uint32, gid vrdma.GID) func(vrdma.Endpoint) []byte {
		return func(vrdma.Endpoint) []byte {
			return []byte(fmt.Sprintf("0000:%06x:%06x:%x\x00%s", qpn, psn, gid[:], ppDone))
		}
	}
	multicast := vrdma.GID{0: 0xff, 1: 0x02, 15: 1}
	loopback := vrdma.GID{10: 0xff, 11: 0xff, 12: 127, 15: 1}
	tests := []struct {
		name string
		say  func(server vrdma.Endpoint) []byte
		want string
	}{
		{"a QP that never connects", addr(r.client.QPN, r.client.PSN, r.client.GID), "nothing completed in"},
		{"a QPN nobody has", func(s vrdma.Endpoint) []byte { return addr(0xabcdef, 0, s.GID)(s) }, "nothing completed in"},
		{"its own QP", func(s vrdma.Endpoint) []byte { return addr(s.QPN, s.PSN, s.GID)(s) }, "nothing completed in"},
		{"a GID nobody has", addr(r.client.QPN, 0, vrdma.GID{0: 0x20, 1: 0x01, 2: 0x0d, 3: 0xb8, 15: 7}), "nothing completed in"},
		{"the loopback address", addr(r.client.QPN, 0, loopback), "nothing completed in"},
		{"a multicast GID", addr(r.client.QPN, 0, multicast), "multicast"},
		{"the multicast QPN", addr(0xffffff, 0, r.client.GID), "multicast"},
		{"the subnet management QP", addr(0, 0, r.client.GID), "QPN 0x000000 is the subnet management QP"},
		{"the general services QP", addr(1, 0, r.client.GID), "QPN 0x000001 is the general services QP"},
		{"no GID", addr(r.client.QPN, 0, vrdma.GID{}), "run both sides with -g"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := r.serveOne(t, tt.say, false)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("the server ended with %v; want an error with %q", err, tt.want)
			}
			t.Log(err)
		})
	}
}
