package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/vrdma/vrdma/internal/daemon"
	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pki"
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
	pki                       *string
	insecure                  *bool
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
		tcpListen:       fs.String("tcp-listen", "", "address of the TCP channel (default: the host's first address, port 4792; 127.0.0.1 on a switch of one host)"),
		tcpAddrs:        fs.String("tcp-addr", "", "comma-separated addresses this host publishes and the TCP channel answers for (default: every address of the interfaces that are up)"),
		etcdName:        fs.String("etcd-name", "", "embedded member: its name (default vrdma)"),
		etcdClient:      fs.String("etcd-client-url", "", "embedded member: where it serves clients (default: a socket only the daemon may use; https://IP:PORT serves other hosts' daemons)"),
		etcdPeer:        fs.String("etcd-peer-url", "", "embedded member: where it talks to the other members (https://IP:PORT; mutual TLS under the switch's CA)"),
		etcdInitCluster: fs.String("etcd-initial-cluster", "", "embedded member: every member as name=peerURL,... to bootstrap a multi-member cluster"),
		etcdDir:         fs.String("etcd-dir", "", "embedded member: its data directory (default STATE-DIR/etcd)"),
		pki:             fs.String("pki", "", "`DIR` holding the switch's certificates: ca.pem, HOST.pem, HOST.key (default: STATE-DIR/pki if it has a ca.pem), as vrdma switch ca init and vrdma host cert make them"),
		insecure:        fs.Bool("insecure", false, "let the TCP channel and etcd listen beyond loopback without TLS: anyone who reaches them may pose as a host (isolated test networks only)"),
	}
}

// config turns the flags into the daemon's switch configuration.
func (f *daemonSwitchFlags) config() (daemon.SwitchConfig, string, error) {
	c := daemon.SwitchConfig{Enable: !*f.noSwitch, Name: *f.name, SMPriority: *f.smPriority, TCPListen: *f.tcpListen, EtcdDir: *f.etcdDir,
		Insecure: *f.insecure}
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
	return c, *f.hostName, nil
}

// member loads this host's certificates of the switch: from --pki, or
// from stateDir/pki when it holds a CA. None is no error unless --pki
// named a directory.
func (f *daemonSwitchFlags) member(stateDir, hostName string) (*pki.Member, error) {
	dir := *f.pki
	if dir == "" {
		if stateDir == "" {
			return nil, nil
		}
		dir = filepath.Join(stateDir, "pki")
		if _, err := os.Stat(filepath.Join(dir, pki.CACertFile)); err != nil {
			return nil, nil
		}
	}
	if hostName == "" {
		var err error
		if hostName, err = os.Hostname(); err != nil {
			return nil, err
		}
	}
	m, err := pki.LoadMember(dir, hostName)
	if err != nil {
		return nil, fmt.Errorf("--pki %s: %w", dir, err)
	}
	return m, nil
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
