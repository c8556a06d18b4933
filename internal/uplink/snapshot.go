package uplink

import (
	"sync/atomic"

	"github.com/vrdma/vrdma/internal/abi"
)

// snapshot is what a link knows about its interface at one moment. It is
// replaced whole, never changed, so readers load it without locks.
type snapshot struct {
	netdev  bool // the interface exists
	active  bool // and is up, with a carrier
	ifindex int
	mtu     abi.MTU
	gids    [][16]byte
	v4      [][4]byte  // the interface's IPv4 addresses
	v6      [][16]byte // and IPv6 addresses
	problem string
}

func (s *snapshot) has4(a []byte) bool {
	for i := range s.v4 {
		x := &s.v4[i]
		if x[0] == a[0] && x[1] == a[1] && x[2] == a[2] && x[3] == a[3] {
			return true
		}
	}
	return false
}

func (s *snapshot) has6(a *[16]byte) bool {
	for i := range s.v6 {
		if s.v6[i] == *a {
			return true
		}
	}
	return false
}

// counters are a link's Stats, updated with atomics once per batch.
type counters struct {
	rxPackets, rxBytes, txPackets, txBytes atomic.Uint64
	rxNotOurs, rxDropped, rxErrors         atomic.Uint64
	txErrors                               atomic.Uint64
	txGSO, rxGSO                           atomic.Uint64
}

func (c *counters) count(pkts, bytes, notOurs, dropped uint64) {
	if pkts != 0 {
		c.rxPackets.Add(pkts)
		c.rxBytes.Add(bytes)
	}
	if notOurs != 0 {
		c.rxNotOurs.Add(notOurs)
	}
	if dropped != 0 {
		c.rxDropped.Add(dropped)
	}
}

func (c *counters) snapshot() Stats {
	return Stats{
		RxPackets: c.rxPackets.Load(), RxBytes: c.rxBytes.Load(),
		TxPackets: c.txPackets.Load(), TxBytes: c.txBytes.Load(),
		RxNotOurs: c.rxNotOurs.Load(), RxDropped: c.rxDropped.Load(),
		RxErrors: c.rxErrors.Load(), TxErrors: c.txErrors.Load(),
		TxGSO: c.txGSO.Load(), RxGSO: c.rxGSO.Load(),
	}
}
