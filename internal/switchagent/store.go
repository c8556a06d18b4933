package switchagent

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pki"
)

// openStore starts the embedded member or dials the cluster.
func (a *Agent) openStore() error {
	cfg := a.cfg
	var err error
	if len(cfg.Endpoints) > 0 {
		if err := fabric.CheckEndpoints(cfg.Endpoints, cfg.Insecure); err != nil {
			return fmt.Errorf("switch: %w", err)
		}
		t := cfg.TLS
		if t == nil && cfg.Member != nil && strings.HasPrefix(cfg.Endpoints[0], "https://") {
			t = admit.ClientTLS(cfg.Member.TLSConfig(), "", nil) // another daemon's embedded member: the switch's CA
		}
		if a.store, err = fabric.Dial(cfg.Endpoints, t); err != nil {
			return fmt.Errorf("switch: %w (check --etcd-endpoints and the TLS options)", err)
		}
		return nil
	}
	dir := cfg.EtcdDir
	if dir == "" && a.stateDir != "" {
		dir = filepath.Join(a.stateDir, "etcd")
	}
	if dir == "" {
		if a.tmpDir, err = os.MkdirTemp("", "vrdma-etcd-"); err != nil {
			return fmt.Errorf("switch: directory for the embedded etcd: %w", err)
		}
		dir = a.tmpDir
	}
	emb := cfg.Embed
	emb.Insecure = emb.Insecure || cfg.Insecure
	if emb.TLS == nil {
		if emb.TLS, err = memberTLSFiles(cfg.Member, dir); err != nil {
			return fmt.Errorf("switch: embedded etcd: %w", err)
		}
	}
	if a.emb, err = fabric.StartEmbedded(dir, emb); err != nil {
		if flag := inUseFlag(err, &emb); flag != "" {
			return fmt.Errorf("switch: embedded etcd: %w: another program uses the port; choose another with %s", err, flag)
		}
		return fmt.Errorf("switch: embedded etcd in %s: %w (give --state-dir a directory you may write, or --etcd-endpoints of a running cluster)", dir, err)
	}
	var t *tls.Config
	if eps := a.emb.Endpoints(); len(eps) > 0 && strings.HasPrefix(eps[0], "https://") {
		if cfg.Member == nil {
			return fmt.Errorf("switch: embedded etcd serves https: give the daemon the switch's certificates (--pki)")
		}
		t = admit.ClientTLS(cfg.Member.TLSConfig(), "", nil)
	}
	if a.store, err = fabric.Dial(a.emb.Endpoints(), t); err != nil {
		return fmt.Errorf("switch: embedded etcd: %w", err)
	}
	return nil
}

// localPKIHost names the certificate of a member's own CA (memberTLSFiles).
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
