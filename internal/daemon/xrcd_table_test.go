package daemon

import (
	"errors"
	"testing"

	"github.com/vrdma/vrdma/internal/engine"
	"github.com/vrdma/vrdma/internal/proto"
)

// TestXRCDTable: opens of one key share a domain, another uid's or
// inode's does not; without create none is found (CodeNotFound, which the
// library turns into EAGAIN), with create and excl an existing one is
// refused (CodeInvalid: EINVAL); the last release forgets the domain.
func TestXRCDTable(t *testing.T) {
	a := engine.NewAdapter("i", "vrdma0", 0, [6]byte{2, 0, 0, 0, 0, 3}, false)
	k := xrcdKey{adapter: a, uid: 4001, dev: 1, ino: 77}
	other := k
	other.uid = 4002
	var tb xrcdTable
	code := func(err error) proto.Code {
		var pe *proto.Error
		if errors.As(err, &pe) {
			return pe.Code
		}
		return proto.CodeOK
	}
	steps := []struct {
		name         string
		key          xrcdKey
		create, excl bool
		want         proto.Code
	}{
		{"no domain, no create", k, false, false, proto.CodeNotFound},
		{"create", k, true, false, proto.CodeOK},
		{"create and excl, it exists", k, true, true, proto.CodeInvalid},
		{"open the existing one", k, false, false, proto.CodeOK},
		{"another uid, same inode, no create", other, false, false, proto.CodeNotFound},
	}
	var got []*sharedXRCD
	for _, s := range steps {
		d, err := tb.open(s.key, s.create, s.excl)
		if code(err) != s.want {
			t.Fatalf("%s: %v, want code %v", s.name, err, s.want)
		}
		if d != nil {
			got = append(got, d)
		}
	}
	if len(got) != 2 || got[0] != got[1] || got[0].refs != 2 {
		t.Fatalf("the two opens of one key got %d domains (refs %d), want one shared", len(got), got[0].refs)
	}
	d2, err := tb.open(other, true, false)
	if err != nil || d2 == got[0] || d2.x == got[0].x {
		t.Fatalf("another uid's open of the same inode shares the first uid's domain (%v)", err)
	}
	tb.release(got[0])
	if _, err := tb.open(k, false, false); err != nil {
		t.Fatalf("after one of two releases the domain is gone: %v", err)
	}
	tb.release(got[0])
	tb.release(got[0])
	if _, err := tb.open(k, false, false); code(err) != proto.CodeNotFound {
		t.Fatalf("after the last release: %v, want not found", err)
	}
}
