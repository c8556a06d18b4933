package daemon

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseStatusGroups(t *testing.T) {
	tests := []struct {
		status string
		want   []uint32
		ok     bool
	}{
		{"Name:\tx\nGid:\t100\t100\t100\t100\nGroups:\t4 24 27 1000 \nNgid:\t0\n", []uint32{4, 24, 27, 1000}, true},
		{"Groups:\t\n", nil, true},
		{"Groups:", nil, true},
		{"Groups: 4294967295", []uint32{4294967295}, true},
		{"Name:\tx\n", nil, false},
		{"Groups:\t4 x 5\n", nil, false},
		{"Groups:\t-1\n", nil, false},
		{"Groups:\t4294967296\n", nil, false},
		{"XGroups:\t5\n", nil, false},
	}
	for _, tt := range tests {
		got, ok := parseStatusGroups([]byte(tt.status))
		if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseStatusGroups(%q) = %v, %v; want %v, %v", tt.status, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzParseStatusGroups: a status file (the kernel's, but read by pid,
// which names whatever process has it) never crashes the parser, and every
// group it returns was written on the Groups line.
func FuzzParseStatusGroups(f *testing.F) {
	f.Add("Groups:\t4 24 27\n")
	f.Add("Name:\tx\nGroups:\n")
	f.Add("Groups:\t99999999999\n")
	f.Fuzz(func(t *testing.T, s string) {
		groups, ok := parseStatusGroups([]byte(s))
		if !ok && groups != nil {
			t.Fatalf("%q: groups %v with ok false", s, groups)
		}
		if ok && len(groups) > 0 && !strings.Contains(s, "Groups:") {
			t.Fatalf("%q: groups %v without a Groups line", s, groups)
		}
	})
}

// TestCredsInGroup: a peer is in its primary and its supplementary groups.
func TestCredsInGroup(t *testing.T) {
	c := creds{known: true, uid: 1000, gid: 100, groups: []uint32{4, 27}}
	for _, g := range []uint32{100, 4, 27} {
		if !c.inGroup(g) {
			t.Errorf("not in group %d", g)
		}
	}
	if c.inGroup(5) || (creds{gid: 5}).inGroup(5) {
		t.Error("in a group it is not in, or with unknown credentials")
	}
}

// TestPeerCreds: the daemon reads a peer's uid, gid and supplementary
// groups; the test process is its own peer.
func TestPeerCreds(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.DialUnix("unixpacket", nil, ln.Addr().(*net.UnixAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cr := peerCreds(s)
	if !cr.known || cr.pid != int32(os.Getpid()) || cr.uid != uint32(os.Geteuid()) || cr.gid != uint32(os.Getegid()) {
		t.Fatalf("peer %+v; this process is pid %d uid %d gid %d", cr, os.Getpid(), os.Geteuid(), os.Getegid())
	}
	groups, err := os.Getgroups()
	if err != nil {
		t.Skip(err)
	}
	for _, g := range groups {
		if !cr.inGroup(uint32(g)) {
			t.Errorf("peer not in supplementary group %d (read %v)", g, cr.groups)
		}
	}
}
