package daemon

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pathsel"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/switchagent"
	"github.com/vrdma/vrdma/switchview"
)

// The switch's commands: `vrdma switch show`, `vrdma portgroup
// add|show|delete`, `vrdma host show`, `vrdma path A B`.

// switchCtx returns the daemon's switch and a context for one command, or
// the error a daemon on no switch gives.
func (s *session) switchCtx() (*switchagent.Agent, context.Context, context.CancelFunc, error) {
	sw := s.d.sw.agent
	if sw == nil {
		return nil, nil, nil, proto.Errorf(proto.CodeState, "this daemon is on no switch: start it without --no-switch (it then runs an embedded etcd), or with --etcd-endpoints")
	}
	ctx, cancel := context.WithTimeout(sw.Context(), 10*time.Second)
	return sw, ctx, cancel, nil
}

// switchErr gives a switch error its command code.
func switchErr(err error) error {
	var ve *fabric.ValidationError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ve):
		return proto.Errorf(proto.CodeInvalid, "%v", err)
	case errors.Is(err, fabric.ErrNotFound):
		return proto.Errorf(proto.CodeNotFound, "%v", err)
	case errors.Is(err, fabric.ErrInUse):
		return proto.Errorf(proto.CodeBusy, "%v", err)
	}
	return proto.Errorf(proto.CodeInternal, "switch: %v", err)
}

func cmdSwitchShow(s *session, _ []byte, _ []int) (any, []int, error) {
	sw, ctx, cancel, err := s.switchCtx()
	if err != nil {
		return nil, nil, err
	}
	defer cancel()
	fab := sw.Fabric()
	st := sw.Status()
	info := switchview.Switch{Name: st.Name, Embedded: st.Embedded, Host: s.d.cfg.HostName, Endpoints: st.Endpoints,
		Fallbacks: st.Fallbacks, HostsGone: st.HostsGone, Role: st.Role, SMReport: st.SMReport, LeaseLost: st.LeaseLost}
	if l, err := fab.Leader(ctx); err == nil {
		info.SMHost, info.SMPriority = l.Host, l.Priority
	}
	info.Security, info.Channel = guardReport(st)
	info.Outsiders = switchview.OutsiderStats{Requests: s.d.CMStats().Outsiders, Packets: s.d.host.WireStats("").Outsiders}
	if cands, keys, err := fab.SMState(ctx); err == nil {
		for _, c := range cands {
			info.SMCandidates = append(info.SMCandidates, fmt.Sprintf("%s(%d)", c.Host, c.Priority))
		}
		for _, k := range keys {
			info.SMElection = append(info.SMElection, fmt.Sprintf("%s(%d)@%d", k.Host, k.Priority, k.Rev))
		}
	}
	hosts, err := fab.Hosts(ctx)
	if err != nil {
		return nil, nil, switchErr(err)
	}
	pgs, err := fab.PortGroups(ctx)
	if err != nil {
		return nil, nil, switchErr(err)
	}
	insts, err := fab.Instances(ctx)
	if err != nil {
		return nil, nil, switchErr(err)
	}
	info.Hosts, info.PortGroups, info.Instances = len(hosts), len(pgs), len(insts)
	return info, nil, nil
}

func cmdPortGroupAdd(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[switchview.PortGroup](body)
	if err != nil {
		return nil, nil, err
	}
	if err := checkName("port group", req.Name); err != nil {
		return nil, nil, err
	}
	sw, ctx, cancel, err := s.switchCtx()
	if err != nil {
		return nil, nil, err
	}
	defer cancel()
	pg := fabric.PortGroup{Name: req.Name, VLAN: req.VLAN, PCP: req.PCP, DSCP: req.DSCP, MTU: req.MTU, PKey: req.PKey}
	return done, nil, switchErr(sw.Fabric().PutPortGroup(ctx, pg))
}

func cmdPortGroupDelete(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[switchview.PortGroup](body)
	if err != nil {
		return nil, nil, err
	}
	if err := checkName("port group", req.Name); err != nil {
		return nil, nil, err
	}
	sw, ctx, cancel, err := s.switchCtx()
	if err != nil {
		return nil, nil, err
	}
	defer cancel()
	if req.Name == DefaultPortGroup {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "port group %s cannot be deleted: adapters that name no port group join it", DefaultPortGroup)
	}
	return done, nil, switchErr(sw.Fabric().DeletePortGroup(ctx, req.Name))
}

func cmdPortGroupList(s *session, _ []byte, _ []int) (any, []int, error) {
	sw, ctx, cancel, err := s.switchCtx()
	if err != nil {
		return nil, nil, err
	}
	defer cancel()
	pgs, err := sw.Fabric().PortGroups(ctx)
	if err != nil {
		return nil, nil, switchErr(err)
	}
	insts, err := sw.Fabric().Instances(ctx)
	if err != nil {
		return nil, nil, switchErr(err)
	}
	count := map[string]int{}
	for _, in := range insts {
		for _, a := range in.Adapters {
			count[a.PortGroup]++
		}
	}
	var resp switchview.PortGroupList
	for _, p := range pgs {
		resp.PortGroups = append(resp.PortGroups, switchview.PortGroup{Name: p.Name, VLAN: p.VLAN, PCP: p.PCP, DSCP: p.DSCP,
			MTU: p.PathMTU(), PKey: p.PartitionKey(), Adapters: count[p.Name]})
	}
	return resp, nil, nil
}

func cmdHostList(s *session, _ []byte, _ []int) (any, []int, error) {
	sw, ctx, cancel, err := s.switchCtx()
	if err != nil {
		return nil, nil, err
	}
	defer cancel()
	fab := sw.Fabric()
	hosts, err := fab.Hosts(ctx)
	if err != nil {
		return nil, nil, switchErr(err)
	}
	sm := ""
	if l, err := fab.Leader(ctx); err == nil {
		sm = l.Host
	}
	self := sw.Record()
	var resp switchview.HostList
	for _, h := range hosts {
		hi := switchview.Host{Name: h.Name, Identity: h.Identity.String(), Addrs: h.Addrs, TCPEndpoint: h.TCPEndpoint,
			SM: h.Name == sm, Self: h.Name == self.Name}
		for _, u := range h.Uplinks {
			st := u.State
			if st == "" {
				st = fabric.UplinkUp
			}
			hi.Uplinks = append(hi.Uplinks, switchview.Uplink{Name: u.Name, Kind: u.Kind, State: st, MTU: u.MTU, GIDs: u.GIDs,
				Device: u.Device, LinkLayer: u.LinkLayer, GIDTypes: u.GIDTypes, Transport: u.Transport, LID: u.LID, SMLID: u.SMLID,
				SubnetPrefix: u.SubnetPrefix, Subnets: u.Subnets, Caps: (*switchview.VerbsCaps)(u.Caps), CarriesQPs: u.CarriesQPs, Carries: u.Carries})
		}
		// Another host's path is the route table's, which new connections
		// take; it follows the switch's watch, which a direct read of the
		// records (hosts, above) may be ahead of.
		c, err := pathsel.Select(sw.HostEnd(self), sw.HostEnd(h))
		switch rc, routed := sw.RouteChoice(h.Name); {
		case err != nil:
			hi.Path = err.Error()
		case h.Name == self.Name:
			hi.Path = c.String()
		case !routed:
			hi.Path = "not routed yet: this daemon's watch has not taken the host's record"
		default:
			hi.Path = rc.String()
		}
		if h.Name != self.Name {
			hi.Bound = boundPaths(sw, self, h)
		}
		resp.Hosts = append(resp.Hosts, hi)
	}
	return resp, nil, nil
}

// ownAdapterName checks an adapter name INSTANCE[/vrdmaN] the peer gives
// and returns it with INSTANCE canonical (names.go).
func (s *session) ownAdapterName(a string) (string, error) {
	inst, dev, slash := strings.Cut(a, "/")
	canon, err := lookupName(s.cred, inst)
	if err != nil {
		return "", err
	}
	if slash {
		if err := checkName("device", dev); err != nil {
			return "", err
		}
		return canon + "/" + dev, nil
	}
	return canon, nil
}

// splitAdapter parses INSTANCE/vrdmaN (or INSTANCE, meaning vrdma0).
func splitAdapter(s string) (string, int, error) {
	inst, dev, ok := strings.Cut(s, "/")
	if !ok {
		return inst, 0, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(dev, "vrdma"))
	if !strings.HasPrefix(dev, "vrdma") || err != nil || n < 0 || n >= MaxAdapters {
		return "", 0, proto.Errorf(proto.CodeInvalid, "adapter %s: name it INSTANCE/vrdmaN with N in 0..%d, e.g. vm1/vrdma0", quoteName(s), MaxAdapters-1)
	}
	return inst, n, nil
}

func cmdPath(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.PathReq](body)
	if err != nil {
		return nil, nil, err
	}
	sw, ctx, cancel, err := s.switchCtx()
	if err != nil {
		return nil, nil, err
	}
	defer cancel()
	if req.A, err = s.ownAdapterName(req.A); err != nil {
		return nil, nil, err
	}
	if req.B, err = s.ownAdapterName(req.B); err != nil {
		return nil, nil, err
	}
	see := func(inst string) bool { return s.d.access.maySeeName(s.cred, inst) }
	ea, ha, err := adapterEnd(ctx, sw, req.A, see)
	if err != nil {
		return nil, nil, err
	}
	eb, hb, err := adapterEnd(ctx, sw, req.B, see)
	if err != nil {
		return nil, nil, err
	}
	r, err := pathRequest(ctx, sw, req.Request, ea.PortGroup)
	if err != nil {
		return nil, nil, err
	}
	c, err := pathsel.SelectFor(ea, eb, r)
	if err != nil {
		return nil, nil, proto.Errorf(proto.CodeInvalid, "%v", err)
	}
	return switchview.Path{Kind: string(c.Kind), Reason: c.Reason, HostA: ha, HostB: hb, UplinkA: ea.Bound, UplinkB: eb.Bound,
		Devices: pathDevices(c, ea.Adapter > eb.Adapter)}, nil, nil
}

// adapterEnd reads what path selection needs of one adapter from the
// switch's records. An instance the asker may not see (see: maySeeName)
// is one the switch does not have: the refusal is the same, and the
// switch is not read, so that it tells neither that the instance exists
// nor where.
func adapterEnd(ctx context.Context, sw *switchagent.Agent, name string, see func(inst string) bool) (pathsel.End, string, error) {
	inst, idx, err := splitAdapter(name)
	if err != nil {
		return pathsel.End{}, "", err
	}
	notFound := func() error {
		return proto.Errorf(proto.CodeNotFound, "no instance %q on switch %s: `vrdma vm show` lists them (the default instance of each daemon is not on the switch)", inst, sw.Name())
	}
	if !see(inst) {
		return pathsel.End{}, "", notFound()
	}
	rec, err := sw.Fabric().Instance(ctx, inst)
	if err != nil {
		if errors.Is(err, fabric.ErrNotFound) {
			return pathsel.End{}, "", notFound()
		}
		return pathsel.End{}, "", switchErr(err)
	}
	var ad *fabric.Adapter
	for i := range rec.Adapters {
		if rec.Adapters[i].Index == idx {
			ad = &rec.Adapters[i]
		}
	}
	if ad == nil {
		return pathsel.End{}, "", proto.Errorf(proto.CodeNotFound, "instance %q has no adapter vrdma%d: it has %d", inst, idx, len(rec.Adapters))
	}
	h, err := sw.Fabric().Host(ctx, rec.Host)
	if err != nil {
		return pathsel.End{}, "", proto.Errorf(proto.CodeNotFound, "instance %q is on host %s, which is not on the switch now: is its daemon running?", inst, rec.Host)
	}
	e := sw.HostEnd(h)
	e.Adapter = fmt.Sprintf("%s/vrdma%d", inst, idx)
	e.PortGroup = ad.PortGroup
	e.Bound = ad.Uplink
	return e, h.Name, nil
}
