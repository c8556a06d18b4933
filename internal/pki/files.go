package pki

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// writePEM writes one PEM block to path with mode perm, replacing the file
// atomically.
func writePEM(path, typ string, der []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), perm); err != nil {
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	if err := os.Chmod(tmp, perm); err != nil { // WriteFile's mode is filtered by the umask
		os.Remove(tmp)
		return fmt.Errorf("pki: chmod %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	return nil
}

// writeKey writes a private key as PKCS #8, readable by its owner only.
func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

// readCert reads the first certificate of a PEM file.
func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	for len(b) > 0 {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("pki: %s: %w", path, err)
			}
			return c, nil
		}
	}
	return nil, fmt.Errorf("pki: %s holds no PEM certificate", path)
}

// readKey reads a PKCS #8, EC or PKCS #1 private key from a PEM file. A key
// file others may read is refused: whoever reads it can act as its owner.
func readKey(path string) (crypto.Signer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("pki: %s may be read by others (mode %04o): whoever reads it can pose as its owner; `chmod 600 %s`", path, st.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("pki: %s holds no PEM key", path)
	}
	var k any
	switch blk.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(blk.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	default:
		return nil, fmt.Errorf("pki: %s: a %q block is not a private key", path, blk.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", path, err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("pki: %s: the key cannot sign", path)
	}
	return s, nil
}
