package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Records a host writes where other members read them (its host record in
// the switch's etcd) carry its certificate and a signature, so that a
// reader takes a record only from the host it names: another member,
// whose certificate is just as valid, can neither forge nor alter it.

// ErrBadSignature reports a record whose signature does not verify.
var ErrBadSignature = errors.New("pki: the signature does not verify")

// CertPEM is the member's certificate, PEM-encoded, for records.
func (m *Member) CertPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: m.Leaf.Raw}))
}

// Sign signs data with the member's key: base64 of the signature over its
// SHA-256.
func (m *Member) Sign(data []byte) (string, error) {
	s, ok := m.Cert.PrivateKey.(crypto.Signer)
	if !ok {
		return "", errors.New("pki: the member's key cannot sign")
	}
	var sig []byte
	var err error
	if _, ed := s.(ed25519.PrivateKey); ed {
		sig, err = s.Sign(rand.Reader, data, crypto.Hash(0)) // Ed25519 signs the message itself
	} else {
		sum := sha256.Sum256(data)
		sig, err = s.Sign(rand.Reader, sum[:], crypto.SHA256)
	}
	if err != nil {
		return "", fmt.Errorf("pki: sign: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// VerifySigned checks a record signed by a member: certPEM must be a
// certificate of the switch's CA and sig its key's signature of data. It
// returns the certificate and the host it names.
func (m *Member) VerifySigned(certPEM string, data []byte, sig string) (*x509.Certificate, string, error) {
	blk, _ := pem.Decode([]byte(certPEM))
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, "", fmt.Errorf("%w: the record carries no certificate", ErrNotMember)
	}
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, "", fmt.Errorf("%w: its certificate: %v", ErrNotMember, err)
	}
	name, err := m.verify([]*x509.Certificate{leaf}, time.Now())
	if err != nil {
		return nil, "", err
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	sum := sha256.Sum256(data)
	ok := false
	switch k := leaf.PublicKey.(type) {
	case *ecdsa.PublicKey:
		ok = ecdsa.VerifyASN1(k, sum[:], raw)
	case *rsa.PublicKey:
		ok = rsa.VerifyPKCS1v15(k, crypto.SHA256, sum[:], raw) == nil
	case ed25519.PublicKey:
		ok = ed25519.Verify(k, data, raw)
	}
	if !ok {
		return nil, "", fmt.Errorf("%w: host %s's record was not written with its key", ErrBadSignature, name)
	}
	return leaf, name, nil
}

// Covers reports whether a certificate lists addr among its IP addresses
// (an IPv4-mapped IPv6 address counts as its IPv4 one).
func Covers(c *x509.Certificate, addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, ip := range c.IPAddresses {
		if a, ok := netip.AddrFromSlice(ip); ok && a.Unmap() == addr {
			return true
		}
	}
	return false
}
