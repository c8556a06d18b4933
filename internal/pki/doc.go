// Package pki is the distributed switch's certificate authority: the
// certificates that make a daemon a member of a switch (DESIGN.md, "Who is
// trusted"). One CA per switch signs one certificate per host; every link
// between daemons — the TCP channel, the connection manager, etcd between
// members and from daemons — is mutual TLS under it, and a peer is the host
// its certificate names.
//
// A directory holds the files, as `vrdma switch ca init` and `vrdma host
// cert` write them:
//
//	ca.pem            the CA's certificate: every host has a copy
//	ca.key            the CA's key: only where certificates are issued (0600)
//	<host>.pem        a host's certificate, naming the host
//	<host>.key        its key (0600)
//
// A host certificate names its host in a URI subject alternative name,
// vrdma://host/<name> (HostName reads it), as well as in the common name;
// it carries the host's IP addresses as IP SANs too, for etcd, whose peers
// check server certificates against the addresses they dial.
//
//	ca, err := pki.InitCA(dir, "vrdma")               // once, on one host
//	err = ca.IssueHost(dir, pki.HostSpec{Name: "a", IPs: ips}) // per host
//	m, err := pki.LoadMember(dir, "a")               // on host a
//	srv := admit.ServerTLS(m.TLSConfig())            // mutual TLS: clients must be members
//	cli := admit.ClientTLS(m.TLSConfig(), "", &chain) // the server's chain, without a name
//	name, err := m.VerifyPeer(chain)                 // "b"
package pki
