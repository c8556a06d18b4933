package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/fabric"
)

// daemonSwitchFlags are the daemon's options for the distributed switch.
type daemonSwitchFlags struct {
	noSwitch                  *bool
	name, hostName            *string
	endpoints                 *string
	cert, key, ca             *string
	smPriority                *int
	tcpListen, tcpAddrs       *string
	etcdName, etcdClient      *string
	etcdPeer, etcdInitCluster *string
	etcdDir                   *string
	cmListen                  *string
	tcpCert, tcpKey, tcpCA    *string
}

func switchFlags(fs *flag.FlagSet) *daemonSwitchFlags {
	return &daemonSwitchFlags{
		noSwitch:        fs.Bool("no-switch", false, "join no switch: serve this host only (no etcd, no TCP channel)"),
		name:            fs.String("switch", daemon.DefaultSwitch, "the distributed switch to join"),
		hostName:        fs.String("host-name", "", "this host's name on the switch (default: the system's host name)"),
		endpoints:       fs.String("etcd-endpoints", "", "comma-separated etcd client URLs of an existing cluster (default: run an etcd member inside the daemon)"),
		cert:            fs.String("etcd-cert", "", "client certificate (PEM) for --etcd-endpoints"),
		key:             fs.String("etcd-key", "", "client key (PEM) for --etcd-cert"),
		ca:              fs.String("etcd-cacert", "", "CA bundle (PEM) that signed the etcd servers' certificates"),
		smPriority:      fs.Int("sm-priority", 0, "subnet manager priority, 0..15: the highest live one holds the role (like OpenSM's)"),
		tcpListen:       fs.String("tcp-listen", "", "address of the TCP channel (default :4792)"),
		tcpAddrs:        fs.String("tcp-addr", "", "comma-separated host addresses the TCP channel answers for (default: every address of the interfaces that are up)"),
		etcdName:        fs.String("etcd-name", "", "embedded member: its name (default vrdma)"),
		etcdClient:      fs.String("etcd-client-url", "", "embedded member: where it serves clients (default http://127.0.0.1:0)"),
		etcdPeer:        fs.String("etcd-peer-url", "", "embedded member: where it talks to the other members"),
		etcdInitCluster: fs.String("etcd-initial-cluster", "", "embedded member: every member as name=peerURL,... to bootstrap a multi-member cluster"),
		etcdDir:         fs.String("etcd-dir", "", "embedded member: its data directory (default STATE-DIR/etcd)"),
		cmListen:        fs.String("cm-listen", "", "address of the connection manager (default :4793; \"off\" for none)"),
		tcpCert:         fs.String("tcp-cert", "", "TLS certificate (PEM) of this daemon on the TCP channel: with --tcp-key, every connection uses TLS"),
		tcpKey:          fs.String("tcp-key", "", "TLS key (PEM) for --tcp-cert"),
		tcpCA:           fs.String("tcp-cacert", "", "CA bundle (PEM) the other daemons' TCP-channel certificates must chain to: makes the TLS mutual"),
	}
}

// config turns the flags into the daemon's switch configuration.
func (f *daemonSwitchFlags) config() (daemon.SwitchConfig, string, error) {
	c := daemon.SwitchConfig{Enable: !*f.noSwitch, Name: *f.name, SMPriority: *f.smPriority, TCPListen: *f.tcpListen, EtcdDir: *f.etcdDir}
	if *f.smPriority < 0 || *f.smPriority > fabric.MaxPriority {
		return c, "", usagef("--sm-priority %d: give 0..%d", *f.smPriority, fabric.MaxPriority)
	}
	for _, e := range splitList(*f.endpoints) {
		if !strings.Contains(e, "://") {
			return c, "", usagef("--etcd-endpoints: %q is not a URL: give http://HOST:PORT or https://HOST:PORT", e)
		}
		c.Endpoints = append(c.Endpoints, e)
	}
	for _, s := range splitList(*f.tcpAddrs) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return c, "", usagef("--tcp-addr: %q is not an IP address", s)
		}
		c.TCPAddrs = append(c.TCPAddrs, a)
	}
	c.Embed = fabric.EmbedOptions{Name: *f.etcdName, ClientURL: *f.etcdClient, PeerURL: *f.etcdPeer, InitialCluster: *f.etcdInitCluster}
	if len(c.Endpoints) > 0 && (*f.etcdClient != "" || *f.etcdPeer != "" || *f.etcdInitCluster != "") {
		return c, "", usagef("--etcd-endpoints joins a cluster; the --etcd-*-url and --etcd-initial-cluster options configure an embedded member: give one or the other")
	}
	if *f.cert != "" || *f.key != "" || *f.ca != "" {
		if len(c.Endpoints) == 0 {
			return c, "", usagef("--etcd-cert, --etcd-key and --etcd-cacert are for --etcd-endpoints")
		}
		t, err := fabric.ClientTLS(*f.cert, *f.key, *f.ca)
		if err != nil {
			return c, "", err
		}
		c.TLS = t
	}
	if *f.tcpCert != "" || *f.tcpKey != "" || *f.tcpCA != "" {
		t, err := channelTLS(*f.tcpCert, *f.tcpKey, *f.tcpCA)
		if err != nil {
			return c, "", err
		}
		c.TCPTLS = t
	}
	return c, *f.hostName, nil
}

// channelTLS builds the TCP channel's TLS: this daemon's certificate
// serves and dials; a CA makes every peer show a certificate it signed.
func channelTLS(cert, key, ca string) (*tls.Config, error) {
	if cert == "" || key == "" {
		return nil, usagef("--tcp-cert and --tcp-key go together, and --tcp-cacert needs them: a daemon on a TLS channel needs its own certificate")
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("--tcp-cert/--tcp-key: %w", err)
	}
	t := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("--tcp-cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tcp-cacert: %s holds no PEM certificate", ca)
		}
		t.RootCAs, t.ClientCAs = pool, pool
	}
	return t, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
