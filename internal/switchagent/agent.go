package switchagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/tcplink"
)

// Agent is a daemon's membership of the distributed switch.
type Agent struct {
	cfg      Config
	hostName string
	stateDir string
	host     Host
	log      *slog.Logger
	ident    fabric.Identity
	ctx      context.Context // ends when the agent leaves
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	// Set by Join, then fixed.
	emb      *fabric.Embedded
	tmpDir   string
	store    *fabric.EtcdStore
	fab      *fabric.Fabric
	tcp      *tcplink.Link
	tcpAddrs []netip.Addr // what the TCP channel answers for

	joined    atomic.Bool // Join has succeeded: the authorizer and resolver answer
	closeOnce sync.Once

	mu      sync.Mutex
	hosts   map[string]fabric.Host // every live host, this one included
	regMu   sync.Mutex             // serialises host record writes; guards sess and cand
	sess    fabric.Session
	cand    *fabric.Candidacy
	routes  atomic.Pointer[routeTable]
	lids    atomic.Pointer[lidTable] // the switch's LIDs (lids.go); nil until Join follows them
	fallbck atomic.Uint64            // connections that took tcp because a host has no RDMA uplink
	gone    atomic.Uint64            // hosts reported gone
	// leaseLost counts the times this host's lease ended under it
	// (lease.go).
	leaseLost atomic.Uint64
	closing   atomic.Bool // close has begun: stand for nothing any more

	// Host records (records_trust.go): the last one this host wrote
	// (guarded by regMu), the records of others refused, its own written
	// again after someone else deleted or altered it.
	written   fabric.Host
	refused   atomic.Uint64
	healed    atomic.Uint64
	refuseLog admit.LogLimit
	uncovered admit.LogLimit
	heal      chan string   // selfHeal's requests to the healer, at most one waiting
	mcWake    chan struct{} // McastChanged's word to the group records' writer (mcast.go)
	// How often the group records' writer and keepCandidacy woke: an idle
	// agent sleeps (docs/design/idle-daemon.md).
	mcSyncs, candLooks atomic.Uint64
}

// New checks cfg and makes the agent of the daemon local describes,
// without joining: Join does. Its Authorize refuses everything until
// Join has succeeded.
func New(cfg Config, local Local) (*Agent, error) {
	if local.Host == nil {
		return nil, fmt.Errorf("switch: Local.Host is nil: give the daemon's host")
	}
	if cfg.Name == "" {
		cfg.Name = DefaultSwitch
	}
	if cfg.SMPriority < 0 || cfg.SMPriority > fabric.MaxPriority {
		return nil, fmt.Errorf("switch: subnet manager priority %d: give one between 0 and %d", cfg.SMPriority, fabric.MaxPriority)
	}
	if cfg.HostTTL == 0 {
		cfg.HostTTL = fabric.DefaultHostTTL
	}
	ident, err := fabric.LocalIdentity()
	if err != nil {
		return nil, fmt.Errorf("switch: %w", err)
	}
	if cfg.HostTag != "" {
		ident.NetNS += "+" + cfg.HostTag
	}
	log := local.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Agent{cfg: cfg, hostName: local.HostName, stateDir: local.StateDir, host: local.Host, log: log,
		ident: ident, hosts: map[string]fabric.Host{},
		uncovered: admit.LogLimit{Interval: 10 * time.Minute, Burst: 1}, heal: make(chan string, 1),
		mcWake: make(chan struct{}, 1)}
	a.routes.Store(&routeTable{})
	a.ctx, a.cancel = context.WithCancel(context.Background())
	return a, nil
}

// Join joins (or, embedded, creates) the switch: the store, the TCP
// channel, the host record under the daemon's lease, the subnet manager's
// candidacy, the watch on the other hosts and the one on the LIDs; then it installs the route
// table as the engine's router. On an error it has left again. Call it
// once.
func (a *Agent) Join() error {
	cfg := a.cfg
	ok := false
	defer func() {
		if !ok {
			a.Close()
		}
	}()
	if err := a.openStore(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
	defer cancel()
	var err error
	if a.fab, err = fabric.New(a.store, cfg.Name); err != nil {
		return fmt.Errorf("switch %q: %w", cfg.Name, err)
	}
	if _, err := a.fab.Init(ctx, fabric.Switch{Name: cfg.Name}); err != nil {
		return fmt.Errorf("switch %q: %w", cfg.Name, err)
	}
	if _, err := a.fab.PortGroup(ctx, DefaultPortGroup); errors.Is(err, fabric.ErrNotFound) {
		if err := a.fab.PutPortGroup(ctx, fabric.PortGroup{Name: DefaultPortGroup}); err != nil {
			return fmt.Errorf("switch %q: create port group %s: %w", cfg.Name, DefaultPortGroup, err)
		}
	} else if err != nil {
		return fmt.Errorf("switch %q: %w", cfg.Name, err)
	}
	if err := a.openTCP(); err != nil {
		return err
	}
	sess, err := a.store.NewSession(ctx, cfg.HostTTL)
	if err != nil {
		return fmt.Errorf("switch %q: lease for the host record: %w", cfg.Name, err)
	}
	a.regMu.Lock()
	a.sess = sess
	a.regMu.Unlock()
	if err := a.register(ctx); err != nil {
		return err
	}
	hosts, err := a.fab.WatchHosts(a.ctx, fabric.LivenessOptions{Grace: cfg.Grace, Trust: a.recordTrust()})
	if err != nil {
		return fmt.Errorf("switch %q: watch hosts: %w", cfg.Name, err)
	}
	lids, err := a.fab.FollowAssignments(a.ctx)
	if err != nil {
		return fmt.Errorf("switch %q: follow the subnet manager's assignments: %w", cfg.Name, err)
	}
	a.wg.Add(4)
	go a.followHosts(hosts)
	go a.healer()
	go a.followLinks()
	go a.followLIDs(lids)
	cand, err := a.fab.Campaign(a.ctx, sess, a.hostName, cfg.SMPriority, fabric.SMConfig{})
	if err != nil {
		return fmt.Errorf("switch %q: subnet manager candidacy: %w", cfg.Name, err)
	}
	a.regMu.Lock()
	a.cand = cand
	a.regMu.Unlock()
	a.wg.Add(2)
	go a.keepLease()
	go a.keepCandidacy()
	if mh, ok := a.host.(McastHost); ok {
		mh.SetSwitchHosts(a.isMember)
		mh.SetMcastNotify(a.McastChanged)
		a.wg.Add(1)
		go a.followMcast(mh)
	}
	a.joined.Store(true)
	a.host.SetRouter(a.route)
	if a.cfg.Member != nil {
		// With certificates, RoCEv2 packets from outside the switch reach
		// only native endpoints (engine.Members).
		a.host.SetMembers(a.isMember)
	}
	ok = true
	return nil
}

// Name is the switch's name.
func (a *Agent) Name() string { return a.cfg.Name }

// HostName is this host's name on the switch.
func (a *Agent) HostName() string { return a.hostName }

// Endpoints returns the etcd endpoints the switch lives on: its embedded
// member's, or those it joined.
func (a *Agent) Endpoints() []string {
	if a.emb != nil {
		return a.emb.Endpoints()
	}
	return a.cfg.Endpoints
}

// Embedded reports whether the daemon runs the switch's etcd member.
func (a *Agent) Embedded() bool { return a.emb != nil }

// Fabric is the switch's records (package fabric), for the daemon's
// commands: port groups, hosts, instances, the subnet manager.
func (a *Agent) Fabric() *fabric.Fabric { return a.fab }

// Context ends when the agent leaves the switch; the daemon's requests to
// the switch derive their contexts from it.
func (a *Agent) Context() context.Context { return a.ctx }

// closeWait bounds how long leaving the switch may take: without quorum
// (the other etcd members gone) etcd calls would wait for ever.
const closeWait = 5 * time.Second

// Close leaves the switch: the router, the candidacy, the host record, the
// TCP channel, the store and the embedded member. What etcd does not
// finish within closeWait is abandoned: the lease then ends by itself.
// Calls after the first do nothing.
func (a *Agent) Close() {
	a.closeOnce.Do(a.leave)
}

func (a *Agent) leave() {
	a.closing.Store(true)
	a.host.SetRouter(nil)
	a.host.SetMembers(nil)
	if mh, ok := a.host.(McastHost); ok {
		mh.SetSwitchHosts(nil)
	}
	left := make(chan struct{})
	go func() {
		defer close(left)
		a.regMu.Lock()
		cand, sess := a.cand, a.sess
		a.regMu.Unlock()
		if cand != nil {
			cand.Close()
		}
		if sess != nil && a.fab != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = a.fab.DeregisterHost(ctx, a.hostName)
			cancel()
			_ = sess.Close()
		}
	}()
	select {
	case <-left:
	case <-time.After(closeWait):
		a.log.Warn("switch: leaving took too long (has etcd lost quorum?): the host record goes when its lease ends")
	}
	a.cancel()
	a.wg.Wait()
	if a.tcp != nil {
		_ = a.host.RemoveLink(TCPLinkName)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if a.store != nil {
			_ = a.store.Close()
		}
		if a.emb != nil {
			_ = a.emb.Close()
		}
	}()
	select {
	case <-stopped:
	case <-time.After(closeWait):
		a.log.Warn("switch: the etcd member did not stop in time")
	}
	if a.tmpDir != "" {
		_ = os.RemoveAll(a.tmpDir)
	}
}
