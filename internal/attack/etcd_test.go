package attack

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vrdma/vrdma/internal/admit"
	"github.com/vrdma/vrdma/internal/netns"
	"github.com/vrdma/vrdma/internal/pki"
)

// etcdAsk sends one HTTP request to an etcd port from host h (over
// TLS with cfg, plaintext if nil) and returns the response's body, or why
// there was none. etcd answers its JSON API on the client port (/v3/...)
// and its member list on the peer port (/members).
func etcdAsk(h *netns.Host, addr string, cfg *tls.Config, method, path, body string) (string, error) {
	c, err := dialFrom(h, addr, cfg, 3*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err := req.Write(c); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	return string(b), nil
}

// The switch's keys as etcd's JSON API takes them: base64 of "/vrdma/" and
// of the end of its range, "/vrdma0".
const (
	switchKey = "L3ZyZG1hLw=="
	switchEnd = "L3ZyZG1hMA=="
)

// TestEtcdOwned: the switch's etcd serves its daemons only — the attacks
// that rewrote the default port group, deleted a tenant's instance record
// and added a fake host from a local user not in the socket's group, and
// rewrote a host's TCP endpoint from another host over plaintext. Another
// uid on host a cannot reach the member's socket, nor write through it;
// mallory cannot read or write the switch on a's client port without a
// certificate, with one of its own making, or in plaintext, and gets
// nothing from the peer port; the same requests from host b with
// its certificate work (so the probes are real).
func TestEtcdOwned(t *testing.T) {
	f := newScene(t, true)
	sock := filepath.Join(f.a.StateDir, "etcd", "client.sock")
	got := tenantRun(t, tenantA, f.a.Socket, "etcd", sock)
	if !strings.HasPrefix(got["etcd-socket"], "EACCES") {
		t.Errorf("uid %d connecting to a's etcd socket: %q, want EACCES", tenantA, got["etcd-socket"])
	}
	if strings.HasPrefix(got["etcd-write"], "ok") {
		t.Errorf("uid %d wrote a port group through a's etcd socket", tenantA)
	}

	member, err := pki.LoadMember(f.pki, "b")
	if err != nil {
		t.Fatal(err)
	}
	real := admit.ClientTLS(member.TLSConfig(), "", nil)
	client := net.JoinHostPort(f.ha.IPv4.String(), "2379")
	peer := net.JoinHostPort(f.ha.IPv4.String(), "2380")
	read := `{"key":"` + switchKey + `","range_end":"` + switchEnd + `"}`
	write := `{"key":"` + switchKey + `","value":"cHduZWQ="}`
	// The controls ask from host b, with b's certificate: etcd's peers also
	// check that a certificate names the address it comes from.
	if body, err := etcdAsk(f.hb, client, real, "POST", "/v3/kv/range", read); err != nil || !strings.Contains(body, `"kvs"`) {
		t.Fatalf("a member reading the switch (the probe's control): %v %.200s", err, body)
	}
	for _, who := range []struct {
		name string
		cfg  *tls.Config
	}{
		{"no certificate", stranger()},
		{"a certificate of mallory's own CA naming host b", forgedMember(t, "b")},
		{"plaintext", nil},
	} {
		for _, op := range []struct{ path, body string }{{"/v3/kv/range", read}, {"/v3/kv/put", write}} {
			if body, err := etcdAsk(f.hm, client, who.cfg, "POST", op.path, op.body); err == nil {
				t.Errorf("mallory with %s: %s on a's client port answered: %.200s", who.name, op.path, body)
			}
		}
		if body, err := etcdAsk(f.hm, peer, who.cfg, "GET", "/members", ""); err == nil {
			t.Errorf("mallory with %s: a's peer port answered /members: %.200s", who.name, body)
		}
	}
	if body, err := etcdAsk(f.hb, peer, real, "GET", "/members", ""); err != nil || !strings.Contains(body, "a") {
		t.Errorf("a member asking the peer port (the probe's control): %v %.200s", err, body)
	}
	pg, err := f.admin(t, f.a).PortGroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pg {
		if p.VLAN != 0 {
			t.Errorf("port group %s has VLAN %d: someone rewrote it", p.Name, p.VLAN)
		}
	}
}
