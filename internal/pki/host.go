package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/vrdma/vrdma/internal/fabric"
)

// hostURIScheme and hostURIHost make the URI SAN that names a host:
// vrdma://host/<name>.
const (
	hostURIScheme = "vrdma"
	hostURIHost   = "host"
)

// HostSpec is what a host certificate says.
type HostSpec struct {
	Name     string       // the host's name on the switch (`vrdma daemon --host-name`)
	IPs      []netip.Addr // its addresses, for etcd's peers (they check them)
	DNSNames []string     // names it is dialled by, if any
	Validity time.Duration
	// Overwrite replaces an existing certificate of the host.
	Overwrite bool
}

// CertFile and KeyFile are where a host's certificate and key live in a
// PKI directory.
func CertFile(dir, host string) string { return filepath.Join(dir, host+".pem") }
func KeyFile(dir, host string) string  { return filepath.Join(dir, host+".key") }

// IssueHost issues a certificate for the host and writes <name>.pem and
// <name>.key (0600) into dir. It refuses to replace an existing one unless
// spec.Overwrite.
func (ca *CA) IssueHost(dir string, spec HostSpec) error {
	if err := fabric.ValidateName("host", spec.Name); err != nil {
		return err
	}
	if spec.Validity == 0 {
		spec.Validity = HostValidity
	}
	if spec.Validity < 0 {
		return errors.New("pki: a certificate's validity must be positive")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki: create %s: %w", dir, err)
	}
	certPath, keyPath := CertFile(dir, spec.Name), KeyFile(dir, spec.Name)
	if !spec.Overwrite {
		for _, p := range []string{certPath, keyPath} {
			if _, err := os.Stat(p); err == nil {
				return fmt.Errorf("%w: %s: host %s has a certificate already (--force replaces it)", ErrExists, p, spec.Name)
			}
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	notAfter := now.Add(spec.Validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: spec.Name, Organization: []string{"vrdma"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// Every member both serves (channel, CM, etcd) and dials.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{HostURI(spec.Name)},
		DNSNames:    spec.DNSNames,
	}
	for _, ip := range spec.IPs {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(ip.Unmap().AsSlice()))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return fmt.Errorf("pki: sign host %s: %w", spec.Name, err)
	}
	if err := writeKey(keyPath, key); err != nil {
		return err
	}
	return writePEM(certPath, "CERTIFICATE", der, 0o644)
}

// HostURI is the URI SAN that names host.
func HostURI(host string) *url.URL {
	return &url.URL{Scheme: hostURIScheme, Host: hostURIHost, Path: "/" + host}
}

// HostName returns the host a certificate names, from its vrdma://host/
// URI; "" if it names none.
func HostName(c *x509.Certificate) string {
	for _, u := range c.URIs {
		if u.Scheme == hostURIScheme && u.Host == hostURIHost && len(u.Path) > 1 {
			name := u.Path[1:]
			if fabric.ValidateName("host", name) == nil {
				return name
			}
		}
	}
	return ""
}
