package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// File names inside a PKI directory.
const (
	CACertFile = "ca.pem"
	CAKeyFile  = "ca.key"
)

// Validity of what InitCA and IssueHost make unless told otherwise.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	HostValidity = 2 * 365 * 24 * time.Hour
)

// ErrExists reports a file that issuing would overwrite.
var ErrExists = errors.New("pki: file exists")

// CA is a switch's certificate authority: its certificate and key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	dir  string
}

// InitCA makes a new CA for the switch named sw and writes ca.pem and
// ca.key (0600) into dir, created 0700 if missing. It refuses to overwrite
// an existing CA: every certificate it issued would stop working.
func InitCA(dir, sw string) (*CA, error) {
	if sw == "" {
		return nil, errors.New("pki: the CA needs the switch's name")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: create %s: %w (run as root, or give --dir a directory you may write)", dir, err)
	}
	for _, f := range []string{CACertFile, CAKeyFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return nil, fmt.Errorf("%w: %s: %s has a CA already; every certificate it issued would stop working if it were replaced: remove both ca files first if that is what you want", ErrExists, filepath.Join(dir, f), dir)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "vrdma switch " + sw + " CA", Organization: []string{"vrdma"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if err := writeKey(filepath.Join(dir, CAKeyFile), key); err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, CACertFile), "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, dir: dir}, nil
}

// LoadCA reads the CA of dir, key included, to issue certificates.
func LoadCA(dir string) (*CA, error) {
	cert, err := readCert(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, fmt.Errorf("%w (make one with `vrdma switch ca init --dir %s`)", err, dir)
	}
	key, err := readKey(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("%w: certificates are issued where the CA's key is, the host that ran `vrdma switch ca init`", err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("pki: %s is not a CA certificate", filepath.Join(dir, CACertFile))
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("pki: %s does not belong to %s: the CA's files are mixed up", filepath.Join(dir, CAKeyFile), filepath.Join(dir, CACertFile))
	}
	return &CA{Cert: cert, Key: key, dir: dir}, nil
}

// Dir is the directory the CA lives in.
func (ca *CA) Dir() string { return ca.dir }

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ka, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ka.Equal(b)
}
