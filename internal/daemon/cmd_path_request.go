package daemon

import (
	"context"

	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pathsel"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/switchagent"
	"github.com/vrdma/vrdma/switchview"
)

// Bounds of a path request: more than any device takes.
const (
	maxPathInline = 1 << 20
	maxPathSGE    = 1 << 16
)

// pathRequest checks what `vrdma path` says the QPs ask (nil: nothing
// special) and gives it the adapters' port group's path MTU when it names
// none: that is the MTU the instance's QPs are given, so a verbs uplink
// whose device takes less is not chosen.
func pathRequest(ctx context.Context, sw *switchagent.Agent, in *switchview.PathRequest, portGroup string) (pathsel.Request, error) {
	var r pathsel.Request
	if in != nil {
		r = pathsel.Request{UD: in.UD, SRQ: in.SRQ, Atomics: in.Atomics, MaxInline: in.MaxInline, MaxSGE: in.MaxSGE, MTU: in.MTU}
	}
	switch {
	case r.MaxInline < 0 || r.MaxInline > maxPathInline:
		return r, proto.Errorf(proto.CodeInvalid, "inline %d: give the bytes of inline data per send WR, 0..%d", r.MaxInline, maxPathInline)
	case r.MaxSGE < 0 || r.MaxSGE > maxPathSGE:
		return r, proto.Errorf(proto.CodeInvalid, "sge %d: give the SGEs per WR, 0..%d", r.MaxSGE, maxPathSGE)
	case r.MTU != 0 && r.MTU != 256 && r.MTU != 512 && r.MTU != 1024 && r.MTU != 2048 && r.MTU != 4096:
		return r, proto.Errorf(proto.CodeInvalid, "mtu %d is not an RDMA path MTU: give 256, 512, 1024, 2048 or 4096", r.MTU)
	}
	if r.MTU == 0 {
		r.MTU = fabric.DefaultMTU
		if pg, err := sw.Fabric().PortGroup(ctx, portGroup); err == nil {
			r.MTU = pg.PathMTU()
		}
	}
	return r, nil
}

// pathDevices is the choice's pair of verbs uplinks as `vrdma path`
// reports it, A on the first adapter's host (swapped: path selection
// ordered the ends the other way).
func pathDevices(c pathsel.Choice, swapped bool) *switchview.PathDevices {
	p := c.Devices
	if p == nil {
		return nil
	}
	a, b := p.A, p.B
	if swapped {
		a, b = b, a
	}
	out := &switchview.PathDevices{A: a.Name, B: b.Name, DeviceA: a.Device, DeviceB: b.Device, Mode: p.Mode}
	if p.Blocked != nil {
		out.Blocked = p.Blocked.Error()
	}
	return out
}
