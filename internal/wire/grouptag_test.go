package wire

import (
	"bytes"
	"errors"
	"testing"
)

// TestSplitGroupTag: a tag AppendGroupTag wrote splits back into its
// tenant and the datagram after it; a frame that is not tagged, a tag cut
// short, a tenant of length 0 or above MaxGroupTenant, or one that is not
// printable, is refused with the error kind that says so.
func TestSplitGroupTag(t *testing.T) {
	dgram := []byte{0x45, 1, 2, 3}
	ok := append(AppendGroupTag(nil, "uid 1000"), dgram...)
	for _, tc := range []struct {
		name   string
		frame  []byte
		tenant string
		err    error
	}{
		{"tagged", ok, "uid 1000", nil},
		{"tag only", AppendGroupTag(nil, "x"), "x", nil},
		{"an IP packet", dgram, "", ErrVersion},
		{"empty", nil, "", ErrVersion},
		{"kind only", []byte{GroupTagKind}, "", ErrTruncated},
		{"tenant cut short", []byte{GroupTagKind, 5, 'u', 'i'}, "", ErrTruncated},
		{"no tenant", []byte{GroupTagKind, 0, 0x45}, "", ErrLength},
		{"tenant too long", append([]byte{GroupTagKind, MaxGroupTenant + 1}, bytes.Repeat([]byte{'a'}, 40)...), "", ErrLength},
		{"control character", []byte{GroupTagKind, 2, 'a', '\n', 0x45}, "", ErrLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tenant, rest, err := SplitGroupTag(tc.frame)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || string(tenant) != tc.tenant || !bytes.Equal(rest, tc.frame[GroupTagLen(tc.tenant):]) {
				t.Fatalf("got %q %x %v, want %q", tenant, rest, err, tc.tenant)
			}
		})
	}
	if ValidGroupTenant("") || ValidGroupTenant("a\tb") || !ValidGroupTenant("uid 4294967295") {
		t.Error("ValidGroupTenant judges wrongly")
	}
}

// FuzzSplitGroupTag: any frame either splits into a printable tenant of
// 1 to MaxGroupTenant bytes and the rest of the frame, or is refused; a
// split tag written again is the frame's own.
func FuzzSplitGroupTag(f *testing.F) {
	f.Add(append(AppendGroupTag(nil, "uid 1000"), 0x45, 0))
	f.Add([]byte{GroupTagKind, 0})
	f.Add([]byte{0x45})
	f.Fuzz(func(t *testing.T, b []byte) {
		tenant, rest, err := SplitGroupTag(b)
		if err != nil {
			return
		}
		if !ValidGroupTenant(string(tenant)) {
			t.Fatalf("split an invalid tenant %q", tenant)
		}
		if again := append(AppendGroupTag(nil, string(tenant)), rest...); !bytes.Equal(again, b) {
			t.Fatalf("the tag written again is %x, the frame %x", again, b)
		}
	})
}
