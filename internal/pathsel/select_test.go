package pathsel

import (
	"errors"
	"testing"
)

func end(adapter, host, pg string, rdma ...string) End {
	return End{Adapter: adapter, Switch: "sw", Host: host, HostID: "id-" + host, PortGroup: pg, RDMA: rdma}
}

func TestSelect(t *testing.T) {
	cases := []struct {
		name   string
		a, b   End
		kind   Kind
		reason string
		err    bool
	}{
		{"same host, two instances", end("i1/vrdma0", "a", "pg"), end("i2/vrdma0", "a", "pg"), Memcpy, "same host a", false},
		{"same host, even with links", end("i1/vrdma0", "a", "pg", "rxe0"), end("i2/vrdma0", "a", "pg", "rxe0"), Memcpy, "same host a", false},
		{"same host, other port groups", end("i1/vrdma0", "a", "pg1"), end("i2/vrdma0", "a", "pg2"), Memcpy, "same host a", false},
		{"both with uplinks", end("i1/vrdma0", "a", "pg", "rxe0"), end("i2/vrdma0", "b", "pg", "rxe1"), RDMA, "hosts a (rxe0) and b (rxe1) both have an RDMA uplink on port group pg", false},
		{"one without", end("i1/vrdma0", "a", "pg", "rxe0"), end("i3/vrdma0", "c", "pg"), TCP, "host c has no RDMA uplink on port group pg", false},
		{"the other without", end("i3/vrdma0", "c", "pg"), end("i1/vrdma0", "a", "pg", "rxe0"), TCP, "host c has no RDMA uplink on port group pg", false},
		{"neither", end("i1/vrdma0", "b", "pg"), end("i3/vrdma0", "a", "pg"), TCP, "neither host a nor host b has an RDMA uplink on port group pg", false},
		{"different port groups", end("i1/vrdma0", "a", "pg1", "rxe0"), end("i2/vrdma0", "b", "pg2", "rxe0"), "", "", true},
		{"different switches", End{Adapter: "x", Switch: "s1", HostID: "1"}, End{Adapter: "y", Switch: "s2", HostID: "2"}, "", "", true},
		{"no switch", End{Adapter: "x", HostID: "1"}, end("y", "b", "pg"), "", "", true},
		{"no host identity", End{Adapter: "x", Switch: "sw"}, end("y", "b", "pg"), "", "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, swap := range []bool{false, true} {
				a, b := c.a, c.b
				if swap {
					a, b = b, a
				}
				got, err := Select(a, b)
				if c.err {
					if !errors.Is(err, ErrNoPath) {
						t.Fatalf("Select = %v, %v; want an ErrNoPath", got, err)
					}
					continue
				}
				if err != nil || got.Kind != c.kind || got.Reason != c.reason {
					t.Fatalf("Select (swapped %v) = %q, %v; want %s: %s", swap, got, err, c.kind, c.reason)
				}
			}
		})
	}
}
