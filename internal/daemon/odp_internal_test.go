package daemon

import (
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
)

// TestOnDemandPinsNothing: an on-demand registration is charged nothing
// against the process's RLIMIT_MEMLOCK, an ordinary one what it maps,
// whatever else its access grants.
func TestOnDemandPinsNothing(t *testing.T) {
	for _, tt := range []struct {
		access abi.Access
		want   uint64
	}{
		{abi.AccessLocalWrite, 8192},
		{abi.AccessAll, 8192},
		{abi.AccessOnDemand, 0},
		{abi.AccessAll | abi.AccessOnDemand, 0},
	} {
		req := proto.RegMRReq{Access: uint32(tt.access), Length: 5000}
		if got := pinCharge(&req, 8192); got != tt.want {
			t.Errorf("access %v: %d bytes pinned, want %d", tt.access, got, tt.want)
		}
	}
}
