package switchagent

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/fabric"
)

// Instance is a local instance as the agent publishes it.
type Instance struct {
	Name      string
	PortGroup string // the switch's port group of its adapters ("" = DefaultPortGroup)
	Native    bool   // native endpoints (.vmx nativeEndpointSupport)
	Async     bool
	Uplink    string // the verbs uplink its adapters are bound to, "" if none
	Adapters  []*engine.Adapter
}

// instanceRecord is inst as the switch keeps it: on this host, each
// adapter with its MAC and its link-local GID.
func (a *Agent) instanceRecord(inst Instance) fabric.Instance {
	pg := inst.PortGroup
	if pg == "" {
		pg = DefaultPortGroup
	}
	rec := fabric.Instance{Name: inst.Name, Host: a.hostName}
	for _, ad := range inst.Adapters {
		ra := fabric.Adapter{Index: ad.Index, MAC: net.HardwareAddr(ad.MAC[:]).String(), PortGroup: pg,
			NativeEndpoint: inst.Native, Async: inst.Async, Uplink: inst.Uplink}
		ll := netip.AddrFrom16(engine.LinkLocalGID(ad.MAC))
		ra.GIDs = []string{ll.String()}
		rec.Adapters = append(rec.Adapters, ra)
	}
	return rec
}

// PublishInstance puts inst's record on the switch, or replaces it. The
// error is the switch's: a *fabric.ValidationError when the record is
// refused (a port group that does not exist, a MAC another instance has).
func (a *Agent) PublishInstance(inst Instance) error {
	ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
	defer cancel()
	return a.fab.PutInstance(ctx, a.instanceRecord(inst))
}

// UnpublishInstance removes a deleted instance's record; a failure is
// logged.
func (a *Agent) UnpublishInstance(name string) {
	ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
	defer cancel()
	if err := a.fab.DeleteInstance(ctx, name); err != nil {
		a.log.Warn("could not remove the instance from the switch", "instance", name, "err", err)
	}
}
