package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ErrNotMember reports a peer whose certificate does not make it a member
// of this switch.
var ErrNotMember = errors.New("pki: not a member of this switch")

// Member is one host's credentials: its certificate and key, and the CA
// whose certificates make the other members.
type Member struct {
	Host     string
	Dir      string
	Cert     tls.Certificate
	Leaf     *x509.Certificate
	CA       *x509.Certificate
	Pool     *x509.CertPool
	CertPath string // the files, for what takes paths (etcd)
	KeyPath  string
	CAPath   string
}

// LoadMember reads host's certificate and key and the CA from dir, and
// checks that they belong together.
func LoadMember(dir, host string) (*Member, error) {
	m := &Member{Host: host, Dir: dir, CertPath: CertFile(dir, host), KeyPath: KeyFile(dir, host), CAPath: filepath.Join(dir, CACertFile)}
	ca, err := readCert(m.CAPath)
	if err != nil {
		return nil, fmt.Errorf("%w (every host needs the switch's ca.pem: `vrdma switch ca init` made it)", err)
	}
	if _, err := os.Stat(m.CertPath); err != nil {
		return nil, fmt.Errorf("pki: no certificate for host %s in %s: issue one with `vrdma host cert %s --ip ADDR,... --dir %s` where the CA's key is, and copy %s.pem and %s.key here", host, dir, host, dir, host, host)
	}
	if _, err := readKey(m.KeyPath); err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(m.CertPath, m.KeyPath)
	if err != nil {
		return nil, fmt.Errorf("pki: host %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	m.Cert, m.Leaf, m.CA = pair, leaf, ca
	m.Pool = x509.NewCertPool()
	m.Pool.AddCert(ca)
	name, err := m.verify([]*x509.Certificate{leaf}, time.Now())
	if err != nil {
		return nil, fmt.Errorf("pki: %s does not hold a valid certificate of this switch's CA for itself: %w", m.CertPath, err)
	}
	if name != host {
		return nil, fmt.Errorf("pki: %s names host %q, not %q: give --host-name %s, or issue a certificate for %s", m.CertPath, name, host, name, host)
	}
	return m, nil
}

// VerifyPeer checks a peer's certificate chain (leaf first, as TLS hands
// it over) against the switch's CA and returns the host it names.
func (m *Member) VerifyPeer(chain []*x509.Certificate) (string, error) {
	return m.verify(chain, time.Now())
}

func (m *Member) verify(chain []*x509.Certificate, now time.Time) (string, error) {
	if len(chain) == 0 {
		return "", fmt.Errorf("%w: it showed no certificate", ErrNotMember)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	leaf := chain[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: m.Pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotMember, err)
	}
	name := HostName(leaf)
	if name == "" {
		return "", fmt.Errorf("%w: certificate %q names no vrdma host", ErrNotMember, leaf.Subject.CommonName)
	}
	return name, nil
}

// TLSConfig is the base TLS configuration of a member: its certificate,
// shown to whoever it talks to, and the CA as the roots of both sides —
// clients must show a certificate of it (mutual TLS) and servers too.
// Endpoints are addresses while certificates name hosts, so the server's
// name is not checked by TLS: admit.ClientTLS verifies the chain without a
// name, and the caller's authorizer checks which member it is (VerifyPeer
// or HostName on the verified leaf).
func (m *Member) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{m.Cert},
		RootCAs:      m.Pool,
		ClientCAs:    m.Pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}
}
