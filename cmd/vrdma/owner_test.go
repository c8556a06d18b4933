package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/vrdma/vrdma"
	"github.com/vrdma/vrdma/internal/daemontest"
)

// fakeAccounts knows alice (1000, primary group 1000), bob (1001, 100) and
// the groups tenants (2000) and wheel (10).
var fakeAccounts = accounts{
	userByName: func(name string) (uint32, uint32, error) {
		switch name {
		case "alice":
			return 1000, 1000, nil
		case "bob":
			return 1001, 100, nil
		}
		return 0, 0, errors.New("unknown user")
	},
	userByID: func(uid uint32) (string, uint32, error) {
		switch uid {
		case 1000:
			return "alice", 1000, nil
		case 1001:
			return "bob", 100, nil
		}
		return "", 0, errors.New("unknown uid")
	},
	groupByName: func(name string) (uint32, error) {
		switch name {
		case "tenants":
			return 2000, nil
		case "wheel":
			return 10, nil
		}
		return 0, errors.New("unknown group")
	},
}

func TestParseOwner(t *testing.T) {
	tests := []struct {
		in   string
		want vrdma.Owner
		err  string
	}{
		{"alice", vrdma.Owner{UID: 1000, GID: 1000}, ""},
		{"bob", vrdma.Owner{UID: 1001, GID: 100}, ""},
		{"alice:tenants", vrdma.Owner{UID: 1000, GID: 2000}, ""},
		{"alice:7", vrdma.Owner{UID: 1000, GID: 7}, ""},
		{"1000", vrdma.Owner{UID: 1000, GID: 1000}, ""},
		{"4242:4343", vrdma.Owner{UID: 4242, GID: 4343}, ""},
		{"0:0", vrdma.Owner{}, ""},
		{"4242", vrdma.Owner{}, "has no account here"},
		{"", vrdma.Owner{}, "give USER or USER:GROUP"},
		{":tenants", vrdma.Owner{}, "give USER or USER:GROUP"},
		{"alice:", vrdma.Owner{}, "give USER or USER:GROUP"},
		{"alice:tenants:x", vrdma.Owner{}, "give USER or USER:GROUP"},
		{"mallory", vrdma.Owner{}, `no user "mallory"`},
		{"alice:nogroup", vrdma.Owner{}, `no group "nogroup"`},
		{"4294967295:1", vrdma.Owner{}, `no user "4294967295"`},
		{"-1:1", vrdma.Owner{}, `no user "-1"`},
		{"99999999999:1", vrdma.Owner{}, `no user "99999999999"`},
	}
	for _, tt := range tests {
		got, err := parseOwner(tt.in, fakeAccounts)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseOwner(%q) = %+v, %v; want an error with %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseOwner(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

// FuzzParseOwner: --owner never crashes the parser, and numbers are read
// as written: a numeric USER is the uid, a numeric GROUP the gid.
func FuzzParseOwner(f *testing.F) {
	for _, s := range []string{"alice", "alice:tenants", "1000:1000", ":", "a:b:c", "4294967295", "1000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := parseOwner(s, fakeAccounts)
		if err != nil {
			return
		}
		name, group, hasGroup := strings.Cut(s, ":")
		if uid, err := parseID(name); err == nil && o.UID != uid {
			t.Fatalf("%q: uid %d", s, o.UID)
		}
		if gid, err := parseID(group); hasGroup && err == nil && o.GID != gid {
			t.Fatalf("%q: gid %d", s, o.GID)
		}
	})
}

// TestAdminErrorsKeepTheirClass: the admin commands go through the
// library, so the daemon's error codes reach the command line's callers
// as the library's classes.
func TestAdminErrorsKeepTheirClass(t *testing.T) {
	sock := daemontest.Start(t)
	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{"link delete of no link", func() error { return runLink([]string{"delete", "nope", "--socket", sock}, nil, nil) }, vrdma.ErrNotFound},
		{"link show of no link", func() error { return runLink([]string{"show", "nope", "--socket", sock}, nil, nil) }, vrdma.ErrNotFound},
		{"vm delete default", func() error { return runVM([]string{"delete", "default", "--socket", sock}, nil, nil) }, vrdma.ErrInvalidArgument},
		{"vm create twice", func() error {
			_ = runVM([]string{"create", "twice", "--socket", sock}, &strings.Builder{}, nil)
			return runVM([]string{"create", "twice", "--socket", sock}, &strings.Builder{}, nil)
		}, vrdma.ErrBusy},
	}
	for _, tt := range tests {
		if err := tt.run(); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}
