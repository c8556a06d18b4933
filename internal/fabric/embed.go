package fabric

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// EmbedOptions configure StartEmbedded. The zero value runs a single-node
// cluster that serves clients on a unix socket in its directory, which
// only the daemon's user may use (ClientSocket), with its peer port on
// loopback, logging warnings to <dir>/etcd.log.
type EmbedOptions struct {
	// Name is the member's name (default "vrdma").
	Name string
	// ClientURL is where the member serves clients. Default: a unix socket
	// in the member's directory (unix:///DIR/client.sock), mode 0600 in a
	// 0700 directory: the daemon is its only client. An https:// URL also
	// serves the daemons of other hosts: it needs TLS, and clients must
	// show a certificate of TLS.CAFile. http:// is refused unless Insecure
	// is set: whoever reaches it — on loopback, every local user — could
	// rewrite the switch.
	ClientURL string
	// PeerURL is where the member talks to the other members. Default:
	// https://127.0.0.1:0 with TLS, else http://127.0.0.1:0 (a free port).
	// A member of a multi-member cluster needs a fixed URL that the others
	// know; on any address but loopback it must be https:// (mutual TLS
	// under TLS) unless Insecure is set.
	PeerURL string
	// InitialCluster lists every member as name=peerURL,... when several
	// members bootstrap together; empty means Name=PeerURL, a single node.
	InitialCluster string
	// ClusterToken distinguishes clusters bootstrapped from the same
	// member list (default "vrdma").
	ClusterToken string
	// TLS is the member's certificate and key and the CA its peers and
	// clients must show certificates of (the switch's, package pki). Peer
	// traffic is mutual TLS under it; https client URLs too.
	TLS *TLSFiles
	// Insecure allows plaintext on addresses other than loopback. Anyone
	// who reaches them may read and rewrite the switch: for isolated test
	// networks only.
	Insecure bool
	// LogFile receives etcd's log (default <dir>/etcd.log; "stderr" for
	// the terminal). LogLevel is etcd's level (default "warn").
	LogFile, LogLevel string
	// UnsafeNoFsync skips fsync: for throwaway test clusters only.
	UnsafeNoFsync bool
	// Heartbeat and ElectionTimeout are raft's timers. Default: etcd's
	// 100 ms / 1 s for a multi-member cluster; SingleHeartbeat /
	// SingleElection for a single node.
	Heartbeat, ElectionTimeout time.Duration
	// StartTimeout bounds the wait for the member to be ready (default
	// 60 s; a multi-member cluster becomes ready once it has quorum).
	StartTimeout time.Duration
}

// The raft timers of a single-node member (docs/design/idle-daemon.md).
// Raft ticks every heartbeat whether or not there is anything to do — in
// an idle daemon, two goroutine wake-ups per tick — and a single node has
// no peers to send heartbeats to. A longer heartbeat costs two things: a
// single node elects itself within one to five ticks of starting (etcd
// fast-forwards its election clock), so it is ready later; and etcd raises
// every lease TTL to at least 1.5 election timeouts (7 ticks, rounded up
// to whole seconds). 100 ms / 500 ms (five ticks, the fewest etcd allows)
// keeps that minimum at 1 s, below MinTTL, so no lease the switch asks for
// grows and a host gone is noticed as soon as before.
const (
	SingleHeartbeat = 100 * time.Millisecond
	SingleElection  = 5 * SingleHeartbeat
)

// BackendBatchInterval is how often the embedded member's backend commits
// (etcd's default: 100 ms).
const BackendBatchInterval = time.Second

// TLSFiles are the PEM files of a member's TLS: its certificate and key,
// and the CA whose certificates the other side must show.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
}

// Embedded is an etcd member running inside this process.
type Embedded struct {
	e     *embed.Etcd
	dir   string
	tls   *TLSFiles
	close sync.Once
	// StartTime is how long StartEmbedded took, from the call to ready.
	StartTime time.Duration
}

// StartEmbedded starts an etcd member with its data in dir (created if
// missing; an existing member's data is reused, so a restarted daemon
// finds its switch again) and waits until it serves clients.
func StartEmbedded(dir string, opts EmbedOptions) (*Embedded, error) {
	start := time.Now()
	if opts.Name == "" {
		opts.Name = "vrdma"
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("fabric: embedded etcd: %w; give a writable state directory", err)
	}
	// The directory holds the client socket and the data: nobody else may
	// enter it, whatever mode an older version created it with.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("fabric: embedded etcd: %w", err)
	}
	if opts.ClientURL == "" {
		u, err := clientSocketURL(dir)
		if err != nil {
			return nil, err
		}
		opts.ClientURL = u
	}
	if opts.PeerURL == "" {
		opts.PeerURL = "http://127.0.0.1:0"
		if opts.TLS != nil {
			opts.PeerURL = "https://127.0.0.1:0"
		}
	}
	if opts.InitialCluster == "" {
		opts.InitialCluster = opts.Name + "=" + opts.PeerURL
		if opts.Heartbeat == 0 && opts.ElectionTimeout == 0 {
			opts.Heartbeat, opts.ElectionTimeout = SingleHeartbeat, SingleElection
		}
	}
	if opts.ClusterToken == "" {
		opts.ClusterToken = "vrdma"
	}
	if opts.LogFile == "" {
		opts.LogFile = filepath.Join(dir, "etcd.log")
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "warn"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	cu, err := memberURL("ClientURL", opts.ClientURL, opts, true)
	if err != nil {
		return nil, err
	}
	pu, err := memberURL("PeerURL", opts.PeerURL, opts, false)
	if err != nil {
		return nil, err
	}

	cfg := embed.NewConfig()
	cfg.Name = opts.Name
	cfg.Dir = filepath.Join(dir, "member-data")
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	if cu.Scheme == "unix" {
		// etcd wants host:port in the URLs a member advertises (it publishes
		// them in the member list, which nothing here reads); a socket has
		// neither, so the advertised one carries a placeholder.
		adv := *cu
		adv.Host = "localhost:0"
		cfg.AdvertiseClientUrls = []url.URL{adv}
	}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = opts.InitialCluster
	cfg.InitialClusterToken = opts.ClusterToken
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.Logger = "zap"
	cfg.LogLevel = opts.LogLevel
	cfg.LogOutputs = []string{opts.LogFile}
	cfg.UnsafeNoFsync = opts.UnsafeNoFsync
	if t := opts.TLS; t != nil {
		info := transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.CAFile, ClientCertAuth: true}
		cfg.PeerTLSInfo = info
		if cu.Scheme == "https" {
			cfg.ClientTLSInfo = info
			cfg.ClientAutoTLS = false
		}
	}
	if opts.Heartbeat > 0 {
		cfg.TickMs = uint(opts.Heartbeat / time.Millisecond)
	}
	if opts.ElectionTimeout > 0 {
		cfg.ElectionMs = uint(opts.ElectionTimeout / time.Millisecond)
	}
	// The backend commits its batch of writes every BackendBatchInterval
	// (etcd's default 100 ms), waking every time even with nothing to
	// commit. The WAL, written before each write is acknowledged, is what
	// makes a write durable: a later backend commit costs nothing but how
	// much of the WAL a restart replays.
	cfg.BackendBatchInterval = BackendBatchInterval
	// Keep history bounded: compact hourly, keep the backend small.
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = "1h"
	cfg.QuotaBackendBytes = 256 << 20

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("fabric: start embedded etcd in %s: %w (its log: %s)", dir, err, opts.LogFile)
	}
	if cu.Scheme == "unix" {
		// Belt and braces: the socket's directory is private already.
		if err := os.Chmod(cu.Path, 0o600); err != nil {
			e.Close()
			return nil, fmt.Errorf("fabric: embedded etcd: restrict its socket: %w", err)
		}
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("fabric: embedded etcd in %s failed while starting: %w (its log: %s)", dir, err, opts.LogFile)
	case <-time.After(opts.StartTimeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("fabric: embedded etcd in %s not ready after %v; with several members, start them all (quorum); see %s", dir, opts.StartTimeout, opts.LogFile)
	}
	return &Embedded{e: e, dir: dir, tls: opts.TLS, StartTime: time.Since(start)}, nil
}

// ClientSocket is the file name of the member's default client socket in
// its directory.
const ClientSocket = "client.sock"

// clientSocketURL is the default client URL: a socket in dir, or, when that
// path is too long for a socket address, in a private temporary directory.
func clientSocketURL(dir string) (string, error) {
	abs, err := filepath.Abs(filepath.Join(dir, ClientSocket))
	if err != nil {
		return "", err
	}
	const maxSocketPath = 107 // sun_path less its terminating NUL
	if len(abs) > maxSocketPath {
		tmp, err := os.MkdirTemp("", "vrdma-etcd-")
		if err != nil {
			return "", fmt.Errorf("fabric: embedded etcd: a directory for its socket: %w", err)
		}
		abs = filepath.Join(tmp, ClientSocket)
	}
	return "unix://" + abs, nil
}

// memberURL parses a client or peer URL of the member and applies the
// rules: plaintext only on loopback (or Insecure), https only with TLS.
func memberURL(field, s string, opts EmbedOptions, client bool) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("fabric: embedded etcd %s %q: %v", field, s, err)
	}
	switch u.Scheme {
	case "unix":
		if !client {
			return nil, fmt.Errorf("fabric: embedded etcd %s %q: members talk over TCP: give https://ip:port", field, s)
		}
		if u.Host != "" || !filepath.IsAbs(u.Path) {
			return nil, fmt.Errorf("fabric: embedded etcd %s %q: give a socket as unix:///absolute/path", field, s)
		}
		return u, nil
	case "http", "https":
	default:
		return nil, fmt.Errorf("fabric: embedded etcd %s %q: want https://ip:port (port 0 picks a free one)", field, s)
	}
	if u.Port() == "" {
		return nil, fmt.Errorf("fabric: embedded etcd %s %q: the URL needs a port (0 picks a free one)", field, s)
	}
	if u.Scheme == "https" && opts.TLS == nil {
		return nil, fmt.Errorf("fabric: embedded etcd %s %q: https needs the member's certificates (the switch's PKI: `vrdma switch ca init`, `vrdma host cert`)", field, s)
	}
	switch {
	case u.Scheme != "http" || opts.Insecure:
	case !isLoopbackHost(u.Hostname()):
		return nil, fmt.Errorf("%w: embedded etcd %s %q is plaintext on an address other hosts reach: anyone there could read and rewrite the switch; use https:// with the switch's certificates (`vrdma switch ca init`, `vrdma host cert`), or --insecure on an isolated test network", ErrInsecure, field, s)
	case client:
		// Every user of this host reaches loopback: the default socket is
		// the daemon's alone.
		return nil, fmt.Errorf("%w: embedded etcd %s %q is plaintext on loopback, where every local user could read and rewrite the switch; leave it unset (a socket only the daemon may use), use https://, or --insecure on a test machine", ErrInsecure, field, s)
	}
	return u, nil
}

// isLoopbackHost reports whether a URL's host is a loopback address.
func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

// CheckEndpoints applies the plaintext rule to the client URLs of an
// external cluster: http:// only on loopback unless insecure.
func CheckEndpoints(endpoints []string, insecure bool) error {
	for _, e := range endpoints {
		u, err := url.Parse(e)
		if err != nil || u.Host == "" && u.Scheme != "unix" {
			return fmt.Errorf("%w: etcd endpoint %q is not a URL: give https://HOST:PORT", ErrInvalid, e)
		}
		if u.Scheme == "http" && !insecure && !isLoopbackHost(u.Hostname()) {
			return fmt.Errorf("%w: etcd endpoint %q is plaintext on an address other hosts reach: use https:// with --etcd-cert/--etcd-key/--etcd-cacert, or --insecure on an isolated test network", ErrInsecure, e)
		}
	}
	return nil
}

// Endpoints are the member's client URLs, with the ports actually bound.
func (m *Embedded) Endpoints() []string {
	var out []string
	scheme := "http"
	if m.tls != nil && len(m.e.Config().ListenClientUrls) > 0 && m.e.Config().ListenClientUrls[0].Scheme == "https" {
		scheme = "https"
	}
	for _, l := range m.e.Clients {
		if l.Addr().Network() == "unix" {
			out = append(out, "unix://"+l.Addr().String())
			continue
		}
		out = append(out, scheme+"://"+l.Addr().String())
	}
	return out
}

// Dial returns a Store on this member, the same client-side code that an
// external cluster gets from Dial.
func (m *Embedded) Dial() (*EtcdStore, error) { return Dial(m.Endpoints(), nil) }

// Dir is the member's state directory.
func (m *Embedded) Dir() string { return m.dir }

// Err reports a fatal error of the running member.
func (m *Embedded) Err() <-chan error { return m.e.Err() }

// Close stops the member; its data stays in its directory.
func (m *Embedded) Close() error {
	m.close.Do(m.e.Close)
	return nil
}

// FreeLoopbackURL returns http://127.0.0.1:<port> for a port that was free
// a moment ago — for the fixed member URLs of a multi-member test cluster.
func FreeLoopbackURL() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return "http://" + l.Addr().String(), nil
}

// InitialCluster formats name=peerURL pairs for EmbedOptions.InitialCluster.
func InitialCluster(names, peerURLs []string) (string, error) {
	if len(names) != len(peerURLs) || len(names) == 0 {
		return "", errors.New("fabric: InitialCluster needs one peer URL per member name")
	}
	parts := make([]string, len(names))
	for i := range names {
		parts[i] = names[i] + "=" + peerURLs[i]
	}
	return strings.Join(parts, ","), nil
}
