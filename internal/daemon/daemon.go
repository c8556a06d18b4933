package daemon

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
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
	HostName   string      // default os.Hostname
	Logger     *slog.Logger
	Switch     SwitchConfig // the distributed switch (switch.go); zero: none
	CMListen   string       // the connection manager's TCP address: "" = ":4793" (DefaultCMPort, every address), CMListenOff = none (cm.go)
	CMResolve  CMResolver   // a remote adapter's address to its daemon's CM endpoint; nil = DefaultCMResolve

	// Who gets in on the connection manager's port (cm_admit.go).
	CMTLS         *tls.Config                                   // TLS on CM connections, both ways; mutual with ClientCAs; nil = plain TCP
	CMAuthorize   admit.Authorizer                              // names the daemon at the other end of a CM connection, or refuses it; nil = anyone
	CMResolvePeer func(addr netip.Addr) (admit.Endpoint, error) // CMResolve, plus the identity expected there (needed with CMAuthorize); set, it replaces CMResolve
	CMLimits      CMLimits                                      // handshakes, idle timeout, inbound connections per source and in all; zero = defaults
}

// Daemon is a running host daemon.
type Daemon struct {
	cfg  Config
	log  *slog.Logger
	host *engine.Host
	ln   *net.UnixListener

	mu        sync.Mutex
	instances map[string]*Instance
	sessions  map[*session]struct{}
	closed    bool
	wg        sync.WaitGroup

	links linkTable  // cmd_link.go
	sw    *swState   // switch.go; nil when the daemon is on no switch
	cm    *cmManager // connection manager (cm.go)
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
	d := &Daemon{cfg: cfg, log: cfg.Logger, host: engine.NewHost(),
		instances: make(map[string]*Instance), sessions: make(map[*session]struct{})}
	if _, err := d.createInstance(proto.InstanceSpec{Name: DefaultInstance, Adapters: 1}, false); err != nil {
		return nil, err
	}
	if err := d.loadInstances(); err != nil {
		return nil, err
	}
	links, err := d.readLinks()
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
	d.restoreLinks(links)
	if d.cm, err = newCMManager(d); err != nil {
		ln.Close()
		d.closeLinks()
		d.host.Close()
		return nil, err
	}
	if cfg.Switch.Enable {
		if err := d.startSwitch(); err != nil {
			d.cm.close()
			ln.Close()
			d.closeLinks()
			d.host.Close()
			return nil, err
		}
	}
	return d, nil
}

// SocketPath returns where the daemon listens.
func (d *Daemon) SocketPath() string { return d.cfg.SocketPath }

// Serve accepts sessions until Close.
func (d *Daemon) Serve() error {
	for {
		c, err := d.ln.AcceptUnix()
		if err != nil {
			d.mu.Lock()
			closed := d.closed
			d.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		s := newSession(d, proto.NewConn(c))
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			c.Close()
			continue
		}
		d.sessions[s] = struct{}{}
		d.wg.Add(1)
		d.mu.Unlock()
		go func() {
			defer d.wg.Done()
			s.serve()
			d.mu.Lock()
			delete(d.sessions, s)
			d.mu.Unlock()
		}()
	}
}

// Close stops accepting, ends every session (clients see DEVICE_FATAL) and
// stops the adapters.
func (d *Daemon) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	sessions := make([]*session, 0, len(d.sessions))
	for s := range d.sessions {
		sessions = append(sessions, s)
	}
	d.mu.Unlock()
	err := d.ln.Close()
	for _, s := range sessions {
		s.conn.Close()
	}
	d.wg.Wait()
	d.cm.close()
	d.mu.Lock()
	for _, inst := range d.instances {
		for _, a := range inst.Adapters {
			d.host.RemoveAdapter(a)
			a.Close()
		}
	}
	d.mu.Unlock()
	if d.sw != nil {
		d.sw.close()
	}
	d.closeLinks()
	d.host.Close()
	return err
}

func (d *Daemon) createInstance(spec proto.InstanceSpec, persist bool) (*Instance, error) {
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.instances[spec.Name]; ok {
		return nil, proto.Errorf(proto.CodeBusy, "instance %q exists already: pick another name or delete it first", spec.Name)
	}
	inst := &Instance{Name: spec.Name, Async: spec.Async, TrustGroup: spec.TrustGroup,
		PortGroup: spec.PortGroup, Native: spec.NativeEndpoints, Pin: spec.Pin}
	for i := 0; i < spec.Adapters; i++ {
		var a *engine.Adapter
		for salt := 0; ; salt++ {
			mac := macFor(d.cfg.HostName, spec.Name, i, salt)
			if d.host.AdapterByGID(engine.LinkLocalGID(mac)) == nil {
				a = engine.NewAdapter(spec.Name, fmt.Sprintf("vrdma%d", i), i, mac, spec.Async)
				a.TrustGroup = spec.TrustGroup
				break
			}
		}
		d.host.AddAdapter(a)
		inst.Adapters = append(inst.Adapters, a)
	}
	d.instances[spec.Name] = inst
	if persist {
		if err := d.saveInstancesLocked(); err != nil {
			d.log.Warn("could not save instances", "err", err)
		}
	}
	return inst, nil
}

func (d *Daemon) deleteInstance(name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	inst, ok := d.instances[name]
	if !ok {
		return proto.Errorf(proto.CodeNotFound, "no instance %q: `vrdma vm show` lists them", name)
	}
	if name == DefaultInstance {
		return proto.Errorf(proto.CodeInvalid, "the default instance cannot be deleted")
	}
	for s := range d.sessions {
		if s.instance() == inst {
			return proto.Errorf(proto.CodeBusy, "instance %q has attached processes: close them first", name)
		}
	}
	for _, a := range inst.Adapters {
		d.host.RemoveAdapter(a)
		a.Close()
	}
	delete(d.instances, name)
	if err := d.saveInstancesLocked(); err != nil {
		d.log.Warn("could not save instances", "err", err)
	}
	return nil
}

func (d *Daemon) instance(name string) *Instance {
	if name == "" {
		name = DefaultInstance
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.instances[name]
}

func (d *Daemon) listInstances() []proto.InstanceInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []proto.InstanceInfo
	for _, inst := range d.instances {
		info := instanceInfo(inst, d.cfg.HostName)
		for s := range d.sessions {
			if s.instance() == inst {
				info.Sessions++
			}
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

const instancesFile = "instances.json"

func (d *Daemon) saveInstancesLocked() error {
	if d.cfg.StateDir == "" {
		return nil
	}
	var specs []proto.InstanceSpec
	for _, inst := range d.instances {
		if inst.Name != DefaultInstance {
			specs = append(specs, inst.spec())
		}
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	b, err := json.MarshalIndent(specs, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.cfg.StateDir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(d.cfg.StateDir, instancesFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(d.cfg.StateDir, instancesFile))
}

func (d *Daemon) loadInstances() error {
	if d.cfg.StateDir == "" {
		return nil
	}
	path := filepath.Join(d.cfg.StateDir, instancesFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("daemon: read %s: %w", path, err)
	}
	var specs []proto.InstanceSpec
	if err := json.Unmarshal(b, &specs); err != nil {
		return fmt.Errorf("daemon: %s is not valid JSON (%v): fix or remove it", path, err)
	}
	for _, s := range specs {
		if _, err := d.createInstance(s, false); err != nil {
			return fmt.Errorf("daemon: %s: %w", path, err)
		}
	}
	return nil
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
