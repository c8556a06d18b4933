package daemon

// Links: RoCEv2 on host interfaces (`vrdma link add|show|delete`), kept in
// StateDir/links.json and opened again when the daemon starts.

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/vrdma/vrdma/internal/engine"

	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/uplink"
	"golang.org/x/sys/unix"
)

const linksFile = "links.json"

// linkType is the one kind of link there is: RoCEv2 over UDP, like the
// kernel's Soft-RoCE driver, whose `rdma link add` calls it rxe.
const linkType = "rxe"

// linkTable is the daemon's links by name: it opens, lists, deletes,
// saves and restores them, and attaches them to the host. It holds what
// that takes of the daemon: its configuration (the links' port, the verbs
// helper, the state directory), its log and its host.
type linkTable struct {
	mu sync.Mutex
	m  map[string]*linkEntry

	cfg  *Config
	log  *slog.Logger
	host *engine.Host
	gone goneUplinks // link_verbs_fault.go
}

// linkEntry is a configured link. l (dev for a verbs link) is nil when it
// could not be opened when the daemon started (the port was taken, say);
// problem says why.
type linkEntry struct {
	spec    proto.LinkSpec
	l       *uplink.Link
	problem string
	verbs   verbsLink // a verbs link's device (link_verbs.go)
}

func cmdLinkAdd(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.LinkSpec](body)
	if err != nil {
		return nil, nil, err
	}
	info, err := s.d.links.add(req)
	if err == nil {
		s.d.sw.linksChanged()
	}
	return info, nil, err
}

func cmdLinkDelete(s *session, body []byte, _ []int) (any, []int, error) {
	req, err := decode[proto.LinkSpec](body)
	if err != nil {
		return nil, nil, err
	}
	if err := checkName("link", req.Name); err != nil {
		return nil, nil, err
	}
	if err := s.d.links.remove(req.Name); err != nil {
		return nil, nil, err
	}
	s.d.sw.linksChanged()
	return done, nil, nil
}

func cmdListLinks(s *session, body []byte, _ []int) (any, []int, error) {
	var req proto.LinkSpec
	if len(body) > 0 {
		var err error
		if req, err = decode[proto.LinkSpec](body); err != nil {
			return nil, nil, err
		}
	}
	if req.Name != "" {
		if err := checkName("link", req.Name); err != nil {
			return nil, nil, err
		}
	}
	links, err := s.d.links.list(req.Name)
	return proto.ListLinksResp{Links: links}, nil, err
}

func validateLink(spec proto.LinkSpec) error {
	if err := checkName("link", spec.Name); err != nil {
		return err
	}
	if spec.Type == verbsLinkType {
		return validateVerbsLink(spec)
	}
	if spec.Type != linkType {
		return proto.Errorf(proto.CodeInvalid, "link type %s: the types are rxe (RoCEv2 over UDP, like the kernel's Soft-RoCE) and verbs (a device of the host's rdma-core)", quoteName(spec.Type))
	}
	if spec.Dev != "" || spec.DevPort != 0 {
		return proto.Errorf(proto.CodeInvalid, "link %s: dev and port are for verbs links; an rxe link takes netdev", spec.Name)
	}
	if spec.Netdev == "" {
		return proto.Errorf(proto.CodeInvalid, "link %s: no netdev: say which interface, `netdev eth0`", spec.Name)
	}
	if len(spec.Netdev) > unix.IFNAMSIZ-1 || strings.ContainsAny(spec.Netdev, "/: \t\n") {
		return proto.Errorf(proto.CodeInvalid, "link %s: netdev %s is no interface name (at most %d characters, no '/', ':' or space): `ip link` lists them", spec.Name, quoteName(spec.Netdev), unix.IFNAMSIZ-1)
	}
	if spec.DSCP > 63 {
		return proto.Errorf(proto.CodeInvalid, "link %s: DSCP %d is not in 0..63", spec.Name, spec.DSCP)
	}
	return nil
}

func (t *linkTable) add(spec proto.LinkSpec) (proto.LinkInfo, error) {
	if err := validateLink(spec); err != nil {
		return proto.LinkInfo{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m[spec.Name]; ok {
		return proto.LinkInfo{}, proto.Errorf(proto.CodeBusy, "link %s exists already: pick another name, or `vrdma link delete %s` first", spec.Name, spec.Name)
	}
	for _, e := range t.m {
		if spec.Type == verbsLinkType || e.spec.Type == verbsLinkType {
			if sameVerbsPort(e.spec, spec) {
				return proto.LinkInfo{}, proto.Errorf(proto.CodeBusy, "%s port %d has a link already, %s: one link per port", spec.Dev, verbsPort(spec), e.spec.Name)
			}
			continue
		}
		if e.spec.Netdev == spec.Netdev {
			return proto.LinkInfo{}, proto.Errorf(proto.CodeBusy, "%s has a link already, %s: one link per interface", spec.Netdev, e.spec.Name)
		}
	}
	e := &linkEntry{spec: spec}
	if err := t.open(e, false); err != nil {
		return proto.LinkInfo{}, err
	}
	if t.m == nil {
		t.m = make(map[string]*linkEntry)
	}
	t.m[spec.Name] = e
	if err := t.saveLocked(); err != nil {
		t.log.Warn("could not save links", "err", err)
	}
	return t.info(e), nil
}

// openLink opens e's link and attaches it to the host. restoring: a
// missing interface is no error, the link waits for it.
func (t *linkTable) open(e *linkEntry, restoring bool) error {
	if e.spec.Type == verbsLinkType {
		return t.openVerbs(e)
	}
	l, err := uplink.Open(uplink.Config{Name: e.spec.Name, Netdev: e.spec.Netdev, DSCP: e.spec.DSCP,
		Port: t.cfg.LinkPort, WaitNetdev: restoring, GSO: t.cfg.LinkGSO})
	if err != nil {
		return linkError(e.spec, err)
	}
	if err := attachLink(t.host, l); err != nil {
		l.Close()
		return proto.Errorf(proto.CodeBusy, "link %s: %v", e.spec.Name, err)
	}
	e.l, e.problem = l, ""
	return nil
}

// linkError gives a failed uplink.Open its command code.
func linkError(spec proto.LinkSpec, err error) error {
	code := proto.CodeInternal
	switch {
	case errors.Is(err, uplink.ErrNoNetdev):
		code = proto.CodeNotFound
	case errors.Is(err, uplink.ErrPortBusy):
		code = proto.CodeBusy
	case errors.Is(err, uplink.ErrPermission):
		code = proto.CodePermission
	case errors.Is(err, uplink.ErrConfig):
		code = proto.CodeInvalid
	}
	return proto.Errorf(code, "link %s on %s: %v", spec.Name, spec.Netdev, err)
}

func (t *linkTable) remove(name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[name]
	if !ok {
		return proto.Errorf(proto.CodeNotFound, "no link %q: `vrdma link show` lists them", name)
	}
	if e.l != nil {
		if err := t.host.RemoveLink(name); err != nil {
			t.log.Warn("removing link", "link", name, "err", err)
		}
	}
	e.verbs.close(errLinkDeleted)
	delete(t.m, name)
	if err := t.saveLocked(); err != nil {
		t.log.Warn("could not save links", "err", err)
	}
	return nil
}

// listLinks describes the links, or only the one called name.
func (t *linkTable) list(name string) ([]proto.LinkInfo, error) {
	t.refreshVerbs(name)
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []proto.LinkInfo{}
	for _, e := range t.m {
		if name == "" || e.spec.Name == name {
			out = append(out, t.info(e))
		}
	}
	if name != "" && len(out) == 0 {
		return nil, proto.Errorf(proto.CodeNotFound, "no link %q: `vrdma link show` lists them", name)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (t *linkTable) info(e *linkEntry) proto.LinkInfo {
	info := proto.LinkInfo{LinkSpec: e.spec, State: "DOWN", PhysState: "DISABLED", Problem: e.problem, GIDs: [][]byte{}}
	if e.spec.Type == verbsLinkType {
		return t.verbsInfo(e, info)
	}
	if e.l == nil {
		return info
	}
	st := e.l.State()
	info.State, info.PhysState, info.Problem = st.Port(), st.Phys(), st.Problem
	for _, g := range e.l.GIDs() {
		info.GIDs = append(info.GIDs, g[:])
	}
	info.ActiveMTU = uint8(e.l.ActiveMTU())
	info.Port = e.l.Port()
	c := e.l.Stats()
	info.Counters = proto.LinkCounters{RxPackets: c.RxPackets, RxBytes: c.RxBytes, TxPackets: c.TxPackets, TxBytes: c.TxBytes,
		RxNotOurs: c.RxNotOurs, RxDropped: c.RxDropped, RxErrors: c.RxErrors, TxErrors: c.TxErrors, TxGSO: c.TxGSO, RxGSO: c.RxGSO}
	ws := t.host.WireStats(e.spec.Name)
	info.Counters.RxMalformed, info.Counters.RxICRC, info.Counters.RxUnknownQP, info.Counters.RxBadPKey = ws.Malformed, ws.ICRC, ws.UnknownQP, ws.BadKey
	info.Counters.RxNotOurs += ws.NotOurs
	info.Counters.TxErrors += ws.TxErrors
	return info
}

func (t *linkTable) saveLocked() error {
	if t.cfg.StateDir == "" {
		return nil
	}
	specs := []proto.LinkSpec{}
	for _, e := range t.m {
		specs = append(specs, e.spec)
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return writeState(t.cfg.StateDir, linksFile, specs)
}

// readLinks reads the saved links; a file that does not parse is an error,
// so that the daemon does not start and then overwrite it.
func (t *linkTable) readSaved() ([]proto.LinkSpec, error) {
	if t.cfg.StateDir == "" {
		return nil, nil
	}
	path := filepath.Join(t.cfg.StateDir, linksFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("daemon: read %s: %w", path, err)
	}
	var specs []proto.LinkSpec
	if err := json.Unmarshal(b, &specs); err != nil {
		return nil, fmt.Errorf("daemon: %s is not valid JSON (%v): fix or remove it", path, err)
	}
	return specs, nil
}

// restoreLinks opens the saved links. One that cannot be opened now is
// logged and kept, DOWN, with the reason: `vrdma link show` tells it and
// `vrdma link delete` removes it. A missing interface is waited for.
func (t *linkTable) restore(specs []proto.LinkSpec) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[string]*linkEntry)
	}
	for _, spec := range specs {
		e := &linkEntry{spec: spec}
		err := validateLink(spec)
		if _, dup := t.m[spec.Name]; err == nil && dup {
			err = fmt.Errorf("link %s is saved twice", spec.Name)
		}
		if err == nil {
			err = t.open(e, true)
		}
		if err != nil {
			var pe *proto.Error
			if errors.As(err, &pe) {
				e.problem = pe.Message
			} else {
				e.problem = err.Error()
			}
			t.log.Warn("could not restore link", "link", spec.Name, "netdev", spec.Netdev, "dev", spec.Dev, "err", e.problem)
		} else if e.l == nil {
			// a verbs link: no interface to wait for
		} else if st := e.l.State(); !st.Netdev {
			t.log.Warn("restored link waits for its interface", "link", spec.Name, "netdev", spec.Netdev)
		}
		if _, dup := t.m[spec.Name]; !dup {
			t.m[spec.Name] = e
		}
	}
}

// closeLinks detaches and closes every link (the daemon is stopping; the
// saved list stays).
func (t *linkTable) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, e := range t.m {
		if e.l != nil {
			if err := t.host.RemoveLink(name); err != nil {
				e.l.Close()
			}
		}
		e.verbs.close(errDaemonStopping)
	}
	t.m = nil
}
