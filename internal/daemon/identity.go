package daemon

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/vrdma/vrdma/internal/engine"
)

// What makes a daemon's adapters look like nobody else's
// (docs/design/embedded-daemon.md). A daemon's adapters are told apart
// from another host's by their GIDs and LIDs, and their QPs by number: two
// daemons on one machine that derive these the same way (from the host's
// name, from LID 1 and QPN 0x11 up) have adapters identical to the last
// bit, and a program given its peer's address on the other daemon finds
// its own adapter there and talks to itself. A daemon with
// Config.DistinctIdentity takes random ones instead.

// identity is where a daemon's adapter addresses start.
type identity struct {
	seed string // mixed into every adapter's MAC, hence its GUID and link-local GID
	lid  uint16 // the first LID the daemon gives on no switch
	qpn  uint32 // the first QPN
}

// Where random identities start: away from the low values every ordinary
// daemon gives first, with room above for as many adapters and QPs as a
// daemon may have.
const (
	randomLIDLow  = 0x0400
	randomLIDHigh = 0x8000 // 0x3FFF LIDs above it, to fabric.MaxUnicastLID
	randomQPNLow  = 0x1000
	randomQPNHigh = 0x800000
)

// defaultIdentity is an ordinary daemon's: the host's name alone, LIDs
// from 1, QPNs from engine.FirstQPN.
var defaultIdentity = identity{lid: 1, qpn: engine.FirstQPN}

// randomIdentity returns an identity from the system's random source.
func randomIdentity() (identity, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return identity{}, fmt.Errorf("daemon: random adapter identity: %w", err)
	}
	lid := randomLIDLow + binary.LittleEndian.Uint16(b[0:])%(randomLIDHigh-randomLIDLow)
	qpn := randomQPNLow + binary.LittleEndian.Uint32(b[2:])%(randomQPNHigh-randomQPNLow)
	return identity{seed: "/" + hex.EncodeToString(b[6:]), lid: lid, qpn: qpn}, nil
}

// macHost is what an adapter's MAC is derived from besides its instance
// and index (macFor), on host hostName.
func (id identity) macHost(hostName string) string { return hostName + id.seed }
