package cm

import (
	"strings"
	"testing"
)

func TestCMNames(t *testing.T) {
	for ty := TypeREQ; ty < typeMax; ty++ {
		if strings.HasPrefix(ty.String(), "type(") || MaxPrivateData(ty) == 0 {
			t.Errorf("type %d: %q, private data %d", ty, ty, MaxPrivateData(ty))
		}
	}
	if Type(0).String() != "type(0)" || MaxPrivateData(0) != 0 {
		t.Error("type 0")
	}
	if RejectInvalidServiceID.String() != "no listener" || Reason(999).String() != "reason 999" {
		t.Errorf("reasons: %q %q", RejectInvalidServiceID, Reason(999))
	}
}

// Every message says its type and its ids.
func TestCMMessages(t *testing.T) {
	for _, tt := range []struct {
		m             Message
		t             Type
		local, remote uint32
	}{
		{&REQ{LocalID: 1}, TypeREQ, 1, 0},
		{&REP{LocalID: 2, RemoteID: 1}, TypeREP, 2, 1},
		{&RTU{LocalID: 1, RemoteID: 2}, TypeRTU, 1, 2},
		{&REJ{LocalID: 3, RemoteID: 4}, TypeREJ, 3, 4},
		{&DREQ{LocalID: 5, RemoteID: 6}, TypeDREQ, 5, 6},
		{&DREP{LocalID: 6, RemoteID: 5}, TypeDREP, 6, 5},
	} {
		if l, r := tt.m.IDs(); tt.m.Type() != tt.t || l != tt.local || r != tt.remote {
			t.Errorf("%T: type %v, ids %d %d; want %v, %d %d", tt.m, tt.m.Type(), l, r, tt.t, tt.local, tt.remote)
		}
	}
}

// An XRC initiator's request is answered by an XRC target; every other
// type by its own.
func TestResponderQPType(t *testing.T) {
	for _, tt := range []struct{ req, want uint8 }{
		{QPTypeRC, QPTypeRC}, {QPTypeUC, QPTypeUC}, {QPTypeXRCSend, QPTypeXRCRecv},
	} {
		if got := ResponderQPType(tt.req); got != tt.want {
			t.Errorf("ResponderQPType(%d) = %d, want %d", tt.req, got, tt.want)
		}
	}
}
