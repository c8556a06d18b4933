package daemon

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/vrdma/vrdma/internal/connmgr"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/proto"
	"github.com/vrdma/vrdma/internal/verbs"
)

// DefaultSocket is where the daemon listens unless told otherwise; the
// library looks there too (VRDMA_SOCKET overrides both).
const DefaultSocket = "/run/vrdma/vrdma.sock"

// Config configures a daemon.
type Config struct {
	SocketPath string      // default DefaultSocket
	SocketMode os.FileMode // default 0660: owner and group may use the devices
	Group      string      // group that owns the socket ("" = leave as created)
	StateDir   string      // where instances and links persist ("" = nothing persists)
	LinkPort   uint16      // UDP port of the links: 0 = 4791, the RoCEv2 port (tests use another)
	LinkGSO    bool        // RoCEv2 links send runs of packets as UDP GSO buffers (uplink.Config.GSO)
	// VerbsHelper is a prebuilt helper for verbs links (verbs.HelperPath);
	// "": $VRDMA_VERBS_HELPER, or built by BuildVerbsHelper.
	VerbsHelper string
	// BuildVerbsHelper builds the helper from the embedded sources
	// (verbsbuild.Build); nil: only a prebuilt one will do.
	BuildVerbsHelper verbs.BuildFunc
	HostName         string // default os.Hostname
	Logger           *slog.Logger
	Switch           SwitchConfig // the distributed switch (package switchagent, switch.go); zero: none

	// AdminGroup names the group (or gid) whose members may administer
	// the switch: links, port groups, instances for other owners. Root and
	// the daemon's own uid always may. "" = no such group.
	AdminGroup string
	// UserLimits are every uid's limits; a resource not named has its
	// default (defaultUserLimits: scaled to the descriptors the daemon may
	// hold). InstanceLimits are every named instance's (default: none
	// beyond the device's maxima). Instances cannot be limited per
	// instance.
	UserLimits     Limits
	InstanceLimits Limits
	// TotalLimits cap what all tenants hold together (default: half of the
	// host's memory locked, nothing else beyond the descriptor reserve), so
	// that many uids, each within its own limits, cannot together take the
	// host: the memory the daemon locks is charged to the daemon's cgroup,
	// not the tenants'.
	TotalLimits Limits
	// LIDRouting configures every port of the daemon for LID routing: an
	// address vector may name its destination by LID alone, without the
	// GRH a RoCE port needs (docs/design/lid-addressing.md). An instance
	// may be configured so by itself (InstanceSpec.LIDRouting).
	LIDRouting bool
	// DistinctIdentity gives the adapters random GUIDs, MACs and GIDs, a
	// random first LID and first QPN, so that they resemble no other
	// daemon's on the host (identity.go): a user's daemon, started by
	// vrdma run, beside another user's or the system's.
	DistinctIdentity bool
	// IdleExit, if positive, closes the daemon once no client has been
	// connected for that long (idle.go): Serve then returns nil.
	IdleExit time.Duration
}

// Daemon is a running host daemon. It makes its parts and wires them
// together (New), accepts sessions (Serve) and stops (Close); each part
// keeps its own state and does its own work: the access policy, the
// instances and their LIDs, the links, the switch member, the connection
// manager.
type Daemon struct {
	cfg  Config
	log  *slog.Logger
	host *engine.Host
	ln   listener

	xrcds xrcdTable // XRC domains opened with files (cmd_xrc.go)

	access accessPolicy // who may do what (access.go)
	ident  identity     // where its adapters' addresses start (identity.go)
	quota  *ledger      // what every uid and instance holds (quota.go)
	pins   *pinLedger   // what every client process has the daemon lock (pinned.go)
	fds    *fdGuard     // the daemon's descriptors (fds.go)
	warns  warnLimiter  // logs trouble at most once a minute per kind (ratelog.go)
	spare  spareFD      // a descriptor given up to shed a connection when none is left (accept.go)

	mu       sync.Mutex    // guards insts, lids.changed, sessions and closed
	insts    instanceTable // instance_table.go
	lids     lidTable      // lid.go
	sessions map[*session]struct{}
	closed   bool
	wg       sync.WaitGroup

	links linkTable        // cmd_link.go
	sw    switchMember     // the switch agent and what the daemon does through it (switch.go)
	cm    *connmgr.Manager // connection manager (cm.go)
}

// New creates a daemon listening on cfg.SocketPath with the default
// instance and any instances saved in cfg.StateDir.
func New(cfg Config) (*Daemon, error) {
	if cfg.SocketPath == "" {
		cfg.SocketPath = DefaultSocket
	}
	if cfg.SocketMode == 0 {
		cfg.SocketMode = 0o660
	}
	if cfg.HostName == "" {
		cfg.HostName, _ = os.Hostname()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{cfg: cfg, log: cfg.Logger,
		sessions: make(map[*session]struct{}), spare: spareFD{-1}, pins: newPinLedger(),
		warns: warnLimiter{log: cfg.Logger}, ident: defaultIdentity}
	d.insts = instanceTable{d: d, m: make(map[string]*Instance)}
	d.sw = switchMember{hostName: cfg.HostName, log: d.log, insts: &d.insts, lids: &d.lids}
	if cfg.DistinctIdentity {
		var err error
		if d.ident, err = randomIdentity(); err != nil {
			return nil, err
		}
	}
	d.lids = lidTable{mu: &d.mu, insts: &d.insts, sw: &d.sw, cfg: &d.cfg, log: d.log, first: d.ident.lid, changed: make(chan struct{})}
	var err error
	if d.access, err = newAccessPolicy(uint32(os.Geteuid()), cfg.AdminGroup); err != nil {
		return nil, err
	}
	if d.fds, d.quota, err = setupLimits(cfg); err != nil {
		return nil, err
	}
	d.host = engine.NewHost()
	d.host.StartQPNsAt(d.ident.qpn)
	d.links.cfg, d.links.log, d.links.host = &d.cfg, d.log, d.host
	if _, err := d.insts.create(proto.InstanceSpec{Name: DefaultInstance, Adapters: fabric.HostDefaultAdapters}, proto.Owner{}, nil, false, nil); err != nil {
		return nil, err
	}
	if err := d.insts.load(false); err != nil {
		return nil, err
	}
	links, err := d.links.readSaved()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(cfg.SocketPath), 0o755); err != nil {
		return nil, fmt.Errorf("daemon: create socket directory: %w (run the daemon as root, or give it --socket PATH in a directory you may write, and clients VRDMA_SOCKET=PATH)", err)
	}
	if c, err := net.Dial("unixpacket", cfg.SocketPath); err == nil {
		c.Close()
		return nil, fmt.Errorf("daemon: another vrdma daemon is serving %s: stop it first, or give this one --socket PATH", cfg.SocketPath)
	}
	_ = os.Remove(cfg.SocketPath)
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: cfg.SocketPath, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("daemon: listen on %s: %w (give --socket a path in a directory you may write)", cfg.SocketPath, err)
	}
	ln.SetUnlinkOnClose(true)
	_ = proto.PassCredentials(ln) // inherited by what it accepts, from the first message on
	if err := os.Chmod(cfg.SocketPath, cfg.SocketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("daemon: chmod socket: %w", err)
	}
	if cfg.Group != "" {
		g, err := user.LookupGroup(cfg.Group)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("daemon: socket group %q: %w (create it, or pass --group '' to leave the socket's group alone)", cfg.Group, err)
		}
		gid, _ := strconv.Atoi(g.Gid)
		if err := os.Chown(cfg.SocketPath, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("daemon: chown socket to group %s: %w", cfg.Group, err)
		}
	}
	d.ln = ln
	d.links.restore(links)
	_ = d.insts.load(true) // the instances bound to verbs links: warns, never fails
	if err := d.applyListenPolicy(); err != nil {
		ln.Close()
		d.links.closeAll()
		d.host.Close()
		return nil, err
	}
	if d.cfg.Switch.Enable {
		if d.sw.agent, err = newAgent(d); err != nil {
			ln.Close()
			d.links.closeAll()
			d.host.Close()
			return nil, err
		}
	}
	if d.cm, err = newCM(d); err != nil {
		ln.Close()
		d.links.closeAll()
		d.host.Close()
		return nil, err
	}
	if d.sw.agent != nil {
		if err := d.sw.join(); err != nil {
			d.cm.Close()
			ln.Close()
			d.links.closeAll()
			d.host.Close()
			return nil, err
		}
	}
	d.spare.reserve()
	if cfg.IdleExit > 0 {
		go d.watchIdle(cfg.IdleExit)
	}
	return d, nil
}

// SocketPath returns where the daemon listens.
func (d *Daemon) SocketPath() string { return d.cfg.SocketPath }

// Close stops accepting, ends every session (clients see DEVICE_FATAL) and
// stops the adapters.
func (d *Daemon) Close() error {
	_, err := d.closeIf(nil)
	return err
}

// closeIf closes the daemon, as Close, if it is open and cond (nil: true),
// asked holding d.mu, holds; it reports whether it did: no session can
// start between the question and the close.
func (d *Daemon) closeIf(cond func() bool) (bool, error) {
	d.mu.Lock()
	if d.closed || cond != nil && !cond() {
		d.mu.Unlock()
		return false, nil
	}
	d.closed = true
	sessions := make([]*session, 0, len(d.sessions))
	for s := range d.sessions {
		sessions = append(sessions, s)
	}
	d.mu.Unlock()
	err := d.ln.Close()
	for _, s := range sessions {
		s.stop()
	}
	d.wg.Wait()
	d.spare.close()
	d.cm.Close()
	d.mu.Lock()
	for _, inst := range d.insts.m {
		for _, a := range inst.Adapters {
			d.host.RemoveAdapter(a)
			a.Close()
		}
	}
	d.mu.Unlock()
	if d.sw.agent != nil {
		d.sw.agent.Close()
	}
	d.links.closeAll()
	d.host.Close()
	return true, err
}

// Stats counts live objects across all sessions.
func (d *Daemon) Stats() proto.StatsResp {
	d.mu.Lock()
	sessions := make([]*session, 0, len(d.sessions))
	for s := range d.sessions {
		sessions = append(sessions, s)
	}
	d.mu.Unlock()
	st := proto.StatsResp{Sessions: len(sessions)}
	for _, s := range sessions {
		s.count(&st)
	}
	return st
}
