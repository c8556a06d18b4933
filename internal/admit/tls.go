package admit

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// Certificates name hosts and endpoints are IP addresses, so a client
// cannot check the server's certificate against the address it dialled
// unless every certificate lists its host's addresses (and is reissued
// when they change). ClientTLS therefore offers two checks: by name, the
// standard one, when the caller has a name to check; or the chain alone,
// verified against the configured CAs for server authentication, with the
// name left to the Authorizer, which sees the verified chain and knows
// which host the resolver expected at the endpoint.

// ServerTLS returns a copy of cfg for the accepting side: when cfg has
// ClientCAs and says nothing of ClientAuth, clients must present a
// certificate those CAs sign (mutual TLS). Nil stays nil.
func ServerTLS(cfg *tls.Config) *tls.Config {
	if cfg == nil {
		return nil
	}
	c := cfg.Clone()
	if c.ClientCAs != nil && c.ClientAuth == tls.NoClientCert {
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c
}

// ClientTLS returns a copy of cfg for dialling a peer. With serverName
// set (or cfg.ServerName), the server's certificate is verified as usual,
// for that name. With neither, the server's chain is verified against
// cfg.RootCAs (the system's if nil) for server authentication without a
// name: whose certificate it is, is the Authorizer's to judge. Either way
// *verified receives the chain that was verified, leaf first, when the
// handshake succeeds. cfg's own VerifyConnection, if any, runs after.
func ClientTLS(cfg *tls.Config, serverName string, verified *[]*x509.Certificate) *tls.Config {
	c := cfg.Clone()
	if c.ServerName == "" {
		c.ServerName = serverName
	}
	byName := c.ServerName != "" && !c.InsecureSkipVerify
	then := c.VerifyConnection
	roots := c.RootCAs
	if !byName {
		c.InsecureSkipVerify = true // the chain is verified below, without a name
	}
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		var chain []*x509.Certificate
		if byName {
			if len(cs.VerifiedChains) == 0 {
				return errors.New("admit: the server's certificate was not verified")
			}
			chain = cs.VerifiedChains[0]
		} else {
			var err error
			if chain, err = VerifyChain(cs.PeerCertificates, roots, x509.ExtKeyUsageServerAuth); err != nil {
				return err
			}
		}
		if then != nil {
			if err := then(cs); err != nil {
				return err
			}
		}
		if verified != nil {
			*verified = chain
		}
		return nil
	}
	return c
}

// VerifyChain verifies a peer's certificates (leaf first, then the
// intermediates it sent) against roots (the system's if nil) for usage,
// without a name, and returns the verified chain, leaf first.
func VerifyChain(certs []*x509.Certificate, roots *x509.CertPool, usage x509.ExtKeyUsage) ([]*x509.Certificate, error) {
	if len(certs) == 0 {
		return nil, errors.New("admit: the peer presented no certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{usage}}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	chains, err := certs[0].Verify(opts)
	if err != nil {
		return nil, fmt.Errorf("admit: the peer's certificate (%q) does not verify against the CAs this daemon trusts: %w", certs[0].Subject.CommonName, err)
	}
	return chains[0], nil
}

// PeerChain returns the certificate chain the accepting side verified for
// a client, leaf first, or nil if the client presented none.
func PeerChain(cs tls.ConnectionState) []*x509.Certificate {
	if len(cs.VerifiedChains) == 0 {
		return nil
	}
	return cs.VerifiedChains[0]
}
