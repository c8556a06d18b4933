package verbs

import (
	"errors"
	"strings"
	"testing"
)

// TestSubnetPrefix: an InfiniBand port's subnet prefix is its GID 0's
// upper half in sysfs's form; a RoCE port has none.
func TestSubnetPrefix(t *testing.T) {
	ib := PortAttr{LinkLayer: LinkLayerInfiniBand, GIDs: []GIDEntry{{Index: 0, GID: [16]byte{0xfe, 0x80, 7: 0x2a, 8: 0x50, 15: 1}}}}
	if got := SubnetPrefix(ib); got != "fe80:0000:0000:002a" {
		t.Errorf("SubnetPrefix(IB) = %q", got)
	}
	roce := ib
	roce.LinkLayer = LinkLayerEthernet
	if got := SubnetPrefix(roce); got != "" {
		t.Errorf("SubnetPrefix(RoCE) = %q, want none", got)
	}
	if got := SubnetPrefix(PortAttr{LinkLayer: LinkLayerInfiniBand}); got != "" {
		t.Errorf("SubnetPrefix(no GIDs) = %q, want none", got)
	}
}

// TestCheckUplink: InfiniBand (IB, RoCE) and iWARP devices can be verbs
// uplinks; usNIC's and unknown transports are refused with a typed error
// that names the transport.
func TestCheckUplink(t *testing.T) {
	for _, tt := range []struct {
		transport int32
		want      string // "" ok
	}{
		{TransportIB, ""}, {TransportIWARP, ""},
		{TransportUSNIC, "transport usNIC"}, {TransportUSNICUDP, "transport usNIC UDP"},
		{TransportUnknown, "transport unknown"}, {TransportUnspecified, "transport unspecified"},
	} {
		err := CheckUplink("dev0", DeviceAttr{PhysPortCnt: 1, Transport: tt.transport})
		if tt.want == "" {
			if err != nil {
				t.Errorf("transport %d: %v", tt.transport, err)
			}
			continue
		}
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "ibv_devinfo -d dev0") {
			t.Errorf("transport %d: %v; want ErrUnsupported naming %q", tt.transport, err, tt.want)
		}
	}
}
