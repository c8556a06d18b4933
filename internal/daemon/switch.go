package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pki"
	"github.com/vrdma/vrdma/internal/tcplink"
)

// DefaultSwitch is the name of the switch a daemon joins unless told
// otherwise.
const DefaultSwitch = "vrdma"

// DefaultPortGroup is the port group every switch has and adapters join
// unless told otherwise.
const DefaultPortGroup = "default"

// TCPLinkName is the name of the TCP channel's link.
const TCPLinkName = "tcp"

// SwitchConfig says how a daemon joins the distributed switch. The zero
// value joins none: the daemon then serves its own host only (memcpy, and
// RoCEv2 to peers addressed by hand).
type SwitchConfig struct {
	Enable bool
	Name   string // the switch; "" = DefaultSwitch

	// Endpoints are the etcd client URLs of an existing cluster; none
	// runs an etcd member inside the daemon (Embed, EtcdDir).
	Endpoints []string
	TLS       *tls.Config // client TLS towards Endpoints
	Embed     fabric.EmbedOptions
	// EtcdDir holds the embedded member's data: "" = StateDir/etcd, or a
	// temporary directory removed at Close when there is no StateDir.
	EtcdDir string

	SMPriority int // the subnet manager's election priority, 0..15 (OpenSM's)

	// TCPListen is where the TCP channel listens: "" = ":4792".
	TCPListen string
	// TCPAddrs are the host addresses the TCP channel answers for (and
	// the GIDs the adapters get from it); none = every address of the
	// host's interfaces that are up, loopback last.
	TCPAddrs []netip.Addr

	// Member is this host's certificate of the switch (package pki). With
	// it, the TCP channel, the connection manager and etcd between hosts
	// run mutual TLS, and a peer is the host its certificate names.
	// Without it, nothing listens beyond loopback unless Insecure.
	Member *pki.Member
	// Insecure lets the TCP channel, the connection manager and etcd use
	// plaintext on addresses other hosts reach: anyone there may then pose
	// as a host of the switch. For isolated test networks only.
	Insecure bool

	// HostTag, if set, is added to this host's identity, so that two
	// daemons in one network namespace count as two hosts (the demo runs
	// two in one process); leave it empty on real hosts.
	HostTag string

	HostTTL time.Duration // the host record's lease (0: fabric.DefaultHostTTL)
	Grace   time.Duration // how long a vanished host may come back (0: fabric.DefaultGrace)
}

// swState is the daemon's membership of the switch.
type swState struct {
	d        *Daemon
	cfg      SwitchConfig
	emb      *fabric.Embedded
	tmpDir   string
	store    *fabric.EtcdStore
	fab      *fabric.Fabric
	sess     fabric.Session
	cand     *fabric.Candidacy
	tcp      *tcplink.Link
	tcpAddrs []netip.Addr // what the TCP channel answers for
	ident    fabric.Identity
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu      sync.Mutex
	hosts   map[string]fabric.Host // every live host, this one included
	regMu   sync.Mutex             // serialises host record writes
	routes  atomic.Pointer[routeTable]
	fallbck atomic.Uint64 // connections that took tcp because a host has no RDMA uplink
	gone    atomic.Uint64 // hosts reported gone
	// leaseLost counts the times this host's lease ended under it
	// (switch_lease.go); sess and cand are guarded by regMu.
	leaseLost atomic.Uint64
	closing   atomic.Bool // close has begun: stand for nothing any more
}

// startSwitch joins (or, embedded, creates) the switch: the store, the
// TCP channel, the host record under the daemon's lease, the subnet
// manager's candidacy and the watch on the other hosts.
func (d *Daemon) startSwitch() error {
	cfg := d.cfg.Switch
	if cfg.Name == "" {
		cfg.Name = DefaultSwitch
	}
	if cfg.SMPriority < 0 || cfg.SMPriority > fabric.MaxPriority {
		return fmt.Errorf("switch: subnet manager priority %d: give one between 0 and %d", cfg.SMPriority, fabric.MaxPriority)
	}
	if cfg.HostTTL == 0 {
		cfg.HostTTL = fabric.DefaultHostTTL
	}
	ident, err := fabric.LocalIdentity()
	if err != nil {
		return fmt.Errorf("switch: %w", err)
	}
	if cfg.HostTag != "" {
		ident.NetNS += "+" + cfg.HostTag
	}
	sw := &swState{d: d, cfg: cfg, ident: ident, hosts: map[string]fabric.Host{}}
	sw.routes.Store(&routeTable{})
	sw.ctx, sw.cancel = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			sw.close()
		}
	}()
	if err := sw.openStore(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(sw.ctx, 30*time.Second)
	defer cancel()
	if sw.fab, err = fabric.New(sw.store, cfg.Name); err != nil {
		return fmt.Errorf("switch %q: %w", cfg.Name, err)
	}
	if _, err := sw.fab.Init(ctx, fabric.Switch{Name: cfg.Name}); err != nil {
		return fmt.Errorf("switch %q: %w", cfg.Name, err)
	}
	if _, err := sw.fab.PortGroup(ctx, DefaultPortGroup); errors.Is(err, fabric.ErrNotFound) {
		if err := sw.fab.PutPortGroup(ctx, fabric.PortGroup{Name: DefaultPortGroup}); err != nil {
			return fmt.Errorf("switch %q: create port group %s: %w", cfg.Name, DefaultPortGroup, err)
		}
	} else if err != nil {
		return fmt.Errorf("switch %q: %w", cfg.Name, err)
	}
	if err := sw.openTCP(); err != nil {
		return err
	}
	if sw.sess, err = sw.store.NewSession(ctx, cfg.HostTTL); err != nil {
		return fmt.Errorf("switch %q: lease for the host record: %w", cfg.Name, err)
	}
	if err := sw.register(ctx); err != nil {
		return err
	}
	hosts, err := sw.fab.WatchHosts(sw.ctx, fabric.LivenessOptions{Grace: cfg.Grace})
	if err != nil {
		return fmt.Errorf("switch %q: watch hosts: %w", cfg.Name, err)
	}
	sw.wg.Add(2)
	go sw.followHosts(hosts)
	go sw.followLinks()
	if sw.cand, err = sw.fab.Campaign(sw.ctx, sw.sess, d.cfg.HostName, cfg.SMPriority, fabric.SMConfig{}); err != nil {
		return fmt.Errorf("switch %q: subnet manager candidacy: %w", cfg.Name, err)
	}
	sw.wg.Add(2)
	go sw.keepLease()
	go sw.keepCandidacy()
	d.sw = sw
	d.host.SetRouter(sw.route)
	d.publishInstances()
	ok = true
	return nil
}

// SwitchEndpoints returns the etcd endpoints the daemon's switch lives on
// (its embedded member's, or those it joined); nil on no switch.
func (d *Daemon) SwitchEndpoints() []string {
	switch sw := d.sw; {
	case sw == nil:
		return nil
	case sw.emb != nil:
		return sw.emb.Endpoints()
	default:
		return sw.cfg.Endpoints
	}
}

// openStore starts the embedded member or dials the cluster.
func (sw *swState) openStore() error {
	cfg, d := sw.cfg, sw.d
	var err error
	if len(cfg.Endpoints) > 0 {
		if err := fabric.CheckEndpoints(cfg.Endpoints, cfg.Insecure); err != nil {
			return fmt.Errorf("switch: %w", err)
		}
		t := cfg.TLS
		if t == nil && cfg.Member != nil && strings.HasPrefix(cfg.Endpoints[0], "https://") {
			t = admit.ClientTLS(cfg.Member.TLSConfig(), "", nil) // another daemon's embedded member: the switch's CA
		}
		if sw.store, err = fabric.Dial(cfg.Endpoints, t); err != nil {
			return fmt.Errorf("switch: %w (check --etcd-endpoints and the TLS options)", err)
		}
		return nil
	}
	dir := cfg.EtcdDir
	if dir == "" && d.cfg.StateDir != "" {
		dir = filepath.Join(d.cfg.StateDir, "etcd")
	}
	if dir == "" {
		if sw.tmpDir, err = os.MkdirTemp("", "vrdma-etcd-"); err != nil {
			return fmt.Errorf("switch: directory for the embedded etcd: %w", err)
		}
		dir = sw.tmpDir
	}
	emb := cfg.Embed
	emb.Insecure = emb.Insecure || cfg.Insecure
	if emb.TLS == nil {
		if emb.TLS, err = memberTLSFiles(cfg.Member, dir); err != nil {
			return fmt.Errorf("switch: embedded etcd: %w", err)
		}
	}
	if sw.emb, err = fabric.StartEmbedded(dir, emb); err != nil {
		return fmt.Errorf("switch: embedded etcd in %s: %w (give --state-dir a directory you may write, or --etcd-endpoints of a running cluster)", dir, err)
	}
	var t *tls.Config
	if eps := sw.emb.Endpoints(); len(eps) > 0 && strings.HasPrefix(eps[0], "https://") {
		if cfg.Member == nil {
			return fmt.Errorf("switch: embedded etcd serves https: give the daemon the switch's certificates (--pki)")
		}
		t = admit.ClientTLS(cfg.Member.TLSConfig(), "", nil)
	}
	if sw.store, err = fabric.Dial(sw.emb.Endpoints(), t); err != nil {
		return fmt.Errorf("switch: embedded etcd: %w", err)
	}
	return nil
}

// localPKIHost names the certificate of a member's own CA (localPKIDir).
const localPKIHost = "etcd-local"

// memberTLSFiles are the embedded member's certificate files: the
// switch's, or, on a switch without a PKI, those of a CA of its own kept in
// its directory, so that even a single node's peer port (on loopback)
// admits nobody without its key.
func memberTLSFiles(m *pki.Member, etcdDir string) (*fabric.TLSFiles, error) {
	if m != nil {
		return &fabric.TLSFiles{CertFile: m.CertPath, KeyFile: m.KeyPath, CAFile: m.CAPath}, nil
	}
	dir := filepath.Join(etcdDir, "pki")
	if _, err := os.Stat(filepath.Join(dir, pki.CACertFile)); errors.Is(err, os.ErrNotExist) {
		ca, err := pki.InitCA(dir, "local")
		if err != nil {
			return nil, err
		}
		if err := ca.IssueHost(dir, pki.HostSpec{Name: localPKIHost, IPs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}); err != nil {
			return nil, err
		}
	}
	local, err := pki.LoadMember(dir, localPKIHost)
	if err != nil {
		return nil, fmt.Errorf("%w (remove %s to make new ones)", err, dir)
	}
	return &fabric.TLSFiles{CertFile: local.CertPath, KeyFile: local.KeyPath, CAFile: local.CAPath}, nil
}

// openTCP opens the TCP channel and attaches it as a link.
func (sw *swState) openTCP() error {
	addrs := sw.cfg.TCPAddrs // filled in by applyListenPolicy
	sw.tcpAddrs = addrs
	var t *tls.Config
	if sw.cfg.Member != nil {
		t = sw.cfg.Member.TLSConfig()
	}
	l, err := tcplink.Open(tcplink.Config{Name: TCPLinkName, Addrs: addrs, Listen: sw.cfg.TCPListen,
		Peers: sw.peerEndpoint, TLS: t, Authorize: sw.d.authorizePeer, Logger: sw.d.log})
	if err != nil {
		return fmt.Errorf("switch: TCP channel: %w (give --tcp-listen another address, or stop what holds the port)", err)
	}
	if err := sw.d.AttachLink(l); err != nil {
		l.Close()
		return fmt.Errorf("switch: TCP channel: %w", err)
	}
	sw.tcp = l
	return nil
}

// hostAddrs lists the addresses of the interfaces that are up, loopback
// only if there is no other; link-local IPv6 ones (which need a zone) are
// left out.
func hostAddrs() ([]netip.Addr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var global, loop []netip.Addr
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 {
			continue
		}
		as, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range as {
			pfx, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			ip := pfx.Addr()
			switch {
			case ip.IsLinkLocalUnicast() || ip.IsMulticast():
			case ip.IsLoopback():
				loop = append(loop, ip)
			default:
				global = append(global, ip)
			}
		}
	}
	// Loopback is this host's only when the host has nothing else: other
	// hosts have it too.
	if len(global) > 0 {
		return global, nil
	}
	if len(loop) == 0 {
		return nil, errors.New("no interface is up with an address: bring one up, or give --tcp-addr")
	}
	return loop, nil
}

// hostRecord describes this host as it is now.
func (sw *swState) hostRecord() fabric.Host {
	d := sw.d
	h := fabric.Host{Name: d.cfg.HostName, Identity: sw.ident}
	for _, g := range sw.tcp.GIDs() {
		a := netip.AddrFrom16(g).Unmap()
		if !a.IsLinkLocalUnicast() {
			h.Addrs = append(h.Addrs, a.String())
		}
	}
	d.links.mu.Lock()
	names := make([]string, 0, len(d.links.m))
	for n := range d.links.m {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e := d.links.m[n]
		u := fabric.Uplink{Name: n, Kind: fabric.UplinkRXE, RoCEVersion: 2, State: fabric.UplinkDown, MTU: 1024}
		if e.l != nil {
			u.State = fabric.UplinkUp
			u.MTU = e.l.ActiveMTU().Bytes()
			for _, g := range e.l.GIDs() {
				u.GIDs = append(u.GIDs, netip.AddrFrom16(g).String())
			}
		}
		if len(u.GIDs) == 0 {
			u.State = fabric.UplinkDown
		}
		h.Uplinks = append(h.Uplinks, u)
	}
	d.links.mu.Unlock()
	// The TCP channel answers for h.Addrs; the record keeps RoCE fields
	// for RoCE uplinks.
	h.Uplinks = append(h.Uplinks, fabric.Uplink{Name: TCPLinkName, Kind: fabric.UplinkTCP, State: fabric.UplinkUp})
	h.TCPEndpoint = sw.tcpEndpoint()
	h.CMEndpoint = sw.cmEndpoint()
	return h
}

// tcpEndpoint is the TCP channel's address as peers should dial it.
func (sw *swState) tcpEndpoint() string { return sw.dialable(sw.tcp.ListenAddr()) }

// cmEndpoint is the connection manager's, "" when it takes no requests.
func (sw *swState) cmEndpoint() string {
	if a := sw.d.CMAddr(); a != nil {
		return sw.dialable(a)
	}
	return ""
}

// dialable is a listener's address as other hosts should dial it: the
// address it listens on, or if that is every address, the first this host
// publishes.
func (sw *swState) dialable(a net.Addr) string {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return ""
	}
	ip := ap.Addr()
	if ip.IsUnspecified() {
		ip = sw.tcpAddrs[0]
	}
	return net.JoinHostPort(ip.Unmap().String(), strconv.Itoa(int(ap.Port())))
}

// register puts (or replaces) the host record under the lease.
func (sw *swState) register(ctx context.Context) error {
	sw.regMu.Lock()
	defer sw.regMu.Unlock()
	if err := sw.fab.RegisterHost(ctx, sw.hostRecord(), sw.sess); err != nil {
		return fmt.Errorf("switch %q: %w", sw.cfg.Name, err)
	}
	return nil
}

// linksChanged publishes the host's uplinks after `vrdma link add|delete`.
func (d *Daemon) linksChanged() {
	sw := d.sw
	if sw == nil {
		return
	}
	ctx, cancel := context.WithTimeout(sw.ctx, 10*time.Second)
	defer cancel()
	if err := sw.register(ctx); err != nil {
		d.log.Warn("could not publish the host's links", "err", err)
	}
}

// followLinks republishes the host record when its links change without a
// command: a link restored when its interface appears, addresses that
// come and go.
func (sw *swState) followLinks() {
	defer sw.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last, _ := json.Marshal(sw.hostRecord())
	for {
		select {
		case <-sw.ctx.Done():
			return
		case <-t.C:
		}
		cur, _ := json.Marshal(sw.hostRecord())
		if bytes.Equal(cur, last) {
			continue
		}
		last = cur
		ctx, cancel := context.WithTimeout(sw.ctx, 10*time.Second)
		if err := sw.register(ctx); err != nil && sw.ctx.Err() == nil {
			sw.d.log.Warn("could not publish the host's links", "err", err)
		}
		cancel()
	}
}

// followHosts keeps the host table and the routes current, and fails the
// QPs of hosts that left.
func (sw *swState) followHosts(ch <-chan fabric.HostEvent) {
	defer sw.wg.Done()
	for ev := range ch {
		if ev.Err != nil {
			if sw.ctx.Err() == nil {
				sw.d.log.Warn("switch: the watch on hosts ended", "err", ev.Err)
			}
			continue
		}
		sw.mu.Lock()
		switch ev.Type {
		case fabric.HostJoined, fabric.HostUpdated:
			sw.hosts[ev.Host.Name] = ev.Host
		case fabric.HostGone:
			if cur, ok := sw.hosts[ev.Host.Name]; ok && cur.Identity.SameHost(ev.Host.Identity) {
				delete(sw.hosts, ev.Host.Name)
			}
		}
		sw.rebuildLocked()
		sw.mu.Unlock()
		if ev.Type == fabric.HostGone && ev.Host.Name != sw.d.cfg.HostName {
			sw.gone.Add(1)
			gids := hostGIDs(ev.Host)
			n := sw.d.host.FailPeers(func(a netip.Addr) bool { return gids[a.As16()] }, fmt.Sprintf("host %s left the switch (its daemon stopped or lost etcd)", ev.Host.Name))
			sw.d.log.Info("host left the switch", "host", ev.Host.Name, "qps_failed", n)
		}
	}
}

// closeWait bounds how long leaving the switch may take: without quorum
// (the other etcd members gone) etcd calls would wait for ever.
const closeWait = 5 * time.Second

// close leaves the switch: the candidacy, the host record, the TCP
// channel, the store and the embedded member. What etcd does not finish
// within closeWait is abandoned: the lease then ends by itself.
func (sw *swState) close() {
	sw.closing.Store(true)
	sw.d.host.SetRouter(nil)
	left := make(chan struct{})
	go func() {
		defer close(left)
		sw.regMu.Lock()
		cand, sess := sw.cand, sw.sess
		sw.regMu.Unlock()
		if cand != nil {
			cand.Close()
		}
		if sess != nil && sw.fab != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = sw.fab.DeregisterHost(ctx, sw.d.cfg.HostName)
			cancel()
			_ = sess.Close()
		}
	}()
	select {
	case <-left:
	case <-time.After(closeWait):
		sw.d.log.Warn("switch: leaving took too long (has etcd lost quorum?): the host record goes when its lease ends")
	}
	sw.cancel()
	sw.wg.Wait()
	if sw.tcp != nil {
		_ = sw.d.host.RemoveLink(TCPLinkName)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if sw.store != nil {
			_ = sw.store.Close()
		}
		if sw.emb != nil {
			_ = sw.emb.Close()
		}
	}()
	select {
	case <-stopped:
	case <-time.After(closeWait):
		sw.d.log.Warn("switch: the etcd member did not stop in time")
	}
	if sw.tmpDir != "" {
		_ = os.RemoveAll(sw.tmpDir)
	}
}
