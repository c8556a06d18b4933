package switchagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/vrdma/vrdma/internal/fabric"
)

// uplinks returns the host's RDMA links sorted by name.
func (a *Agent) uplinks() []Uplink {
	ups := a.host.Uplinks()
	sort.Slice(ups, func(i, j int) bool { return ups[i].Name < ups[j].Name })
	return ups
}

// Record is this host's record as it is now: its name and identity, the
// addresses the TCP channel answers for, its uplinks (the RDMA links, then
// the TCP channel) and the endpoints of its TCP channel and connection
// manager. The agent keeps it on the switch under the daemon's lease.
func (a *Agent) Record() fabric.Host {
	h := fabric.Host{Name: a.hostName, Identity: a.ident}
	for _, g := range a.tcp.GIDs() {
		ip := netip.AddrFrom16(g).Unmap()
		if !ip.IsLinkLocalUnicast() {
			h.Addrs = append(h.Addrs, ip.String())
		}
	}
	for _, up := range a.uplinks() {
		if v := up.Verbs; v != nil {
			h.Uplinks = append(h.Uplinks, verbsRecord(up.Name, v))
			continue
		}
		u := fabric.Uplink{Name: up.Name, Kind: fabric.UplinkRXE, RoCEVersion: 2, State: fabric.UplinkDown, MTU: 1024}
		if up.Link != nil {
			u.State = fabric.UplinkUp
			u.MTU = up.Link.ActiveMTU().Bytes()
			for _, g := range up.Link.GIDs() {
				u.GIDs = append(u.GIDs, netip.AddrFrom16(g).String())
			}
		}
		if len(u.GIDs) == 0 {
			u.State = fabric.UplinkDown
		}
		h.Uplinks = append(h.Uplinks, u)
	}
	// The TCP channel answers for h.Addrs; the record keeps RoCE fields
	// for RoCE uplinks.
	h.Uplinks = append(h.Uplinks, fabric.Uplink{Name: TCPLinkName, Kind: fabric.UplinkTCP, State: fabric.UplinkUp})
	h.TCPEndpoint = a.tcpEndpoint()
	return a.ownRecord(h)
}

// verbsRecord is a verbs uplink as the host record carries it.
func verbsRecord(name string, v *VerbsUplink) fabric.Uplink {
	u := fabric.Uplink{Name: name, Kind: fabric.UplinkVerbs, State: fabric.UplinkDown, Device: v.Device,
		LinkLayer: v.LinkLayer, Transport: v.Transport, LID: v.LID, MTU: v.MTU,
		SMLID: v.SMLID, SubnetPrefix: v.SubnetPrefix, CarriesQPs: v.CarriesQPs, Carries: append([]string(nil), v.Carries...)}
	if v.Caps != nil {
		c := *v.Caps
		u.Caps = &c
	}
	for _, p := range v.Subnets {
		u.Subnets = append(u.Subnets, p.Masked().String())
	}
	if v.Up {
		u.State = fabric.UplinkUp
	}
	for i, g := range v.GIDs {
		u.GIDs = append(u.GIDs, netip.AddrFrom16(g).String())
		u.GIDTypes = append(u.GIDTypes, v.GIDTypes[i])
	}
	return u
}

// register puts (or replaces) the host record under the lease.
func (a *Agent) register(ctx context.Context) error {
	a.regMu.Lock()
	defer a.regMu.Unlock()
	h, err := a.signedRecord(a.sess.Lease())
	if err != nil {
		return fmt.Errorf("switch %q: %w", a.cfg.Name, err)
	}
	if err := a.fab.RegisterHostTrusting(ctx, h, a.sess, a.recordTrust()); err != nil {
		return fmt.Errorf("switch %q: %w", a.cfg.Name, err)
	}
	a.written = h
	return nil
}

// LinksChanged publishes the host's uplinks at once; the daemon calls it
// after `vrdma link add|delete`. (Changes without a command, a link
// restored when its interface appears or addresses that come and go, are
// published within a second.) A failure is logged.
func (a *Agent) LinksChanged() {
	ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
	defer cancel()
	if err := a.register(ctx); err != nil {
		a.log.Warn("could not publish the host's links", "err", err)
	}
}

// followLinks republishes the host record when its links change without a
// command: a link restored when its interface appears, addresses that
// come and go.
func (a *Agent) followLinks() {
	defer a.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last, _ := json.Marshal(a.Record())
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
		}
		cur, _ := json.Marshal(a.Record())
		if bytes.Equal(cur, last) {
			continue
		}
		last = cur
		ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
		if err := a.register(ctx); err != nil && a.ctx.Err() == nil {
			a.log.Warn("could not publish the host's links", "err", err)
		}
		cancel()
	}
}
