package fabric

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// EmbedOptions configure StartEmbedded. The zero value runs a single-node
// cluster on loopback with ports the kernel picks, logging warnings to
// <dir>/etcd.log.
type EmbedOptions struct {
	// Name is the member's name (default "vrdma").
	Name string
	// ClientURL and PeerURL are where the member listens for clients and
	// for the other members. Default: http://127.0.0.1:0, a free port
	// (Endpoints() tells which). A member of a multi-member cluster needs
	// fixed URLs that the others know (FreeLoopbackURL picks some).
	ClientURL, PeerURL string
	// InitialCluster lists every member as name=peerURL,... when several
	// members bootstrap together; empty means Name=PeerURL, a single node.
	InitialCluster string
	// ClusterToken distinguishes clusters bootstrapped from the same
	// member list (default "vrdma").
	ClusterToken string
	// LogFile receives etcd's log (default <dir>/etcd.log; "stderr" for
	// the terminal). LogLevel is etcd's level (default "warn").
	LogFile, LogLevel string
	// UnsafeNoFsync skips fsync: for throwaway test clusters only.
	UnsafeNoFsync bool
	// Heartbeat and ElectionTimeout are raft's timers. Default: etcd's
	// 100 ms / 1 s for a multi-member cluster; 20 ms / 200 ms for a single
	// node, which has no peers to wait for — a single node elects itself
	// within one election timeout of starting, so this makes it ready about
	// 0.5 s sooner.
	Heartbeat, ElectionTimeout time.Duration
	// StartTimeout bounds the wait for the member to be ready (default
	// 60 s; a multi-member cluster becomes ready once it has quorum).
	StartTimeout time.Duration
}

// Embedded is an etcd member running inside this process.
type Embedded struct {
	e     *embed.Etcd
	dir   string
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
	if opts.ClientURL == "" {
		opts.ClientURL = "http://127.0.0.1:0"
	}
	if opts.PeerURL == "" {
		opts.PeerURL = "http://127.0.0.1:0"
	}
	if opts.InitialCluster == "" {
		opts.InitialCluster = opts.Name + "=" + opts.PeerURL
		if opts.Heartbeat == 0 && opts.ElectionTimeout == 0 {
			opts.Heartbeat, opts.ElectionTimeout = 20*time.Millisecond, 200*time.Millisecond
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
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("fabric: embedded etcd: %w; give a writable state directory", err)
	}
	cu, err := parseURL("ClientURL", opts.ClientURL)
	if err != nil {
		return nil, err
	}
	pu, err := parseURL("PeerURL", opts.PeerURL)
	if err != nil {
		return nil, err
	}

	cfg := embed.NewConfig()
	cfg.Name = opts.Name
	cfg.Dir = filepath.Join(dir, "member-data")
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = opts.InitialCluster
	cfg.InitialClusterToken = opts.ClusterToken
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.Logger = "zap"
	cfg.LogLevel = opts.LogLevel
	cfg.LogOutputs = []string{opts.LogFile}
	cfg.UnsafeNoFsync = opts.UnsafeNoFsync
	if opts.Heartbeat > 0 {
		cfg.TickMs = uint(opts.Heartbeat / time.Millisecond)
	}
	if opts.ElectionTimeout > 0 {
		cfg.ElectionMs = uint(opts.ElectionTimeout / time.Millisecond)
	}
	// Keep history bounded: compact hourly, keep the backend small.
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = "1h"
	cfg.QuotaBackendBytes = 256 << 20

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("fabric: start embedded etcd in %s: %w (its log: %s)", dir, err, opts.LogFile)
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
	return &Embedded{e: e, dir: dir, StartTime: time.Since(start)}, nil
}

func parseURL(field, s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Port() == "" {
		return nil, fmt.Errorf("fabric: embedded etcd %s %q: want http://ip:port (port 0 picks a free one)", field, s)
	}
	return u, nil
}

// Endpoints are the member's client URLs, with the ports actually bound.
func (m *Embedded) Endpoints() []string {
	var out []string
	for _, l := range m.e.Clients {
		out = append(out, "http://"+l.Addr().String())
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
