package fabric

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// ClientTLS builds the TLS configuration for an external etcd cluster from
// the usual files: a client certificate and key (both or neither) and the
// CA that signed the servers' certificates (empty: the system's roots).
func ClientTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("%w: etcd client certificate and key must be given together (--etcd-cert and --etcd-key)", ErrInvalid)
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("fabric: etcd client certificate %s / key %s: %w", certFile, keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("fabric: etcd CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: %s holds no PEM certificate; give the CA that signed the etcd servers' certificates", ErrInvalid, caFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}
