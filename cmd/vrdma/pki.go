package main

import (
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/pki"
)

// The switch's certificates: `vrdma switch ca init` makes the CA once, on
// one host; `vrdma host cert NAME` issues each host's certificate there.
// Copy ca.pem, NAME.pem and NAME.key to host NAME's PKI directory (where
// its daemon looks: STATE-DIR/pki, or --pki).

const (
	caUsage       = "switch ca init [--dir DIR] [--switch NAME]"
	hostCertUsage = "host cert NAME --ip ADDR,... [--dns NAME,...] [--days N] [--dir DIR] [--force]"
)

// DefaultPKIDir is where the daemon looks for its certificates and where
// these commands write them unless told otherwise.
const DefaultPKIDir = "/var/lib/vrdma/pki"

func runSwitchCA(args []string, stdout io.Writer) error {
	sub, args := subcommand(args, "")
	if sub != "init" {
		return usagef("unknown switch ca command %q: %s", sub, caUsage)
	}
	fs := flag.NewFlagSet("switch ca init", flag.ContinueOnError)
	dir := fs.String("dir", DefaultPKIDir, "`DIR` for ca.pem and ca.key (0600)")
	sw := fs.String("switch", daemon.DefaultSwitch, "the switch `NAME` the CA is for")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: vrdma %s\n\n", caUsage)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("switch ca init takes no arguments, got %q", pos)
	}
	ca, err := pki.InitCA(*dir, *sw)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "CA of switch %s: %s (key %s, keep it on this host only)\n", *sw,
		filepath.Join(ca.Dir(), pki.CACertFile), filepath.Join(ca.Dir(), pki.CAKeyFile))
	fmt.Fprintf(stdout, "next: `vrdma host cert NAME --ip ADDR --dir %s` for each host\n", ca.Dir())
	return nil
}

func runHostCert(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("host cert", flag.ContinueOnError)
	dir := fs.String("dir", DefaultPKIDir, "the CA's directory `DIR`, where the host's files are written too")
	ips := fs.String("ip", "", "`ADDR,...`: comma-separated addresses the host publishes: the other hosts route only to these (etcd members check them too)")
	dns := fs.String("dns", "", "`NAME,...`: comma-separated DNS names the host is dialled by")
	days := fs.Int("days", int(pki.HostValidity/(24*time.Hour)), "`N` days the certificate is valid")
	force := fs.Bool("force", false, "replace the host's existing certificate")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: vrdma %s\n\n", hostCertUsage)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("%s: name one host (its --host-name, default its system host name)", hostCertUsage)
	}
	if *days < 1 {
		return usagef("--days %d: give at least 1", *days)
	}
	if *ips == "" {
		return usagef("%s: --ip is missing: list the addresses host %s publishes (the other hosts route only to addresses its certificate lists)", hostCertUsage, pos[0])
	}
	spec := pki.HostSpec{Name: pos[0], DNSNames: splitList(*dns), Validity: time.Duration(*days) * 24 * time.Hour, Overwrite: *force}
	for _, s := range splitList(*ips) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return usagef("--ip: %q is not an IP address", s)
		}
		spec.IPs = append(spec.IPs, a)
	}
	ca, err := pki.LoadCA(*dir)
	if err != nil {
		return err
	}
	if err := ca.IssueHost(*dir, spec); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "host %s: %s and %s, signed by %s\n", spec.Name, pki.CertFile(*dir, spec.Name), pki.KeyFile(*dir, spec.Name), filepath.Join(*dir, pki.CACertFile))
	if h, _ := os.Hostname(); h != spec.Name {
		fmt.Fprintf(stdout, "copy %s, %s.pem and %s.key to host %s's %s (0600 for the key)\n", pki.CACertFile, spec.Name, spec.Name, spec.Name, DefaultPKIDir)
	}
	return nil
}
