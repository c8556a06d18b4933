package ibcm

import (
	"bytes"
	"testing"
)

// FuzzParse feeds any bytes to every decoder: none panics, the header
// re-encodes to its bytes (but the reserved ones), and a REQ or REJ that
// decodes encodes to bytes that decode to the same message.
func FuzzParse(f *testing.F) {
	for _, m := range capturedMADs(f) {
		f.Add(m)
	}
	f.Add(make([]byte, MADSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = ParseIPHeader(b)
		h, d, err := ParseMAD(b)
		if err != nil {
			return
		}
		want := bytes.Clone(b[:HeaderSize])
		want[18], want[19] = 0, 0 // reserved
		if got := AppendHeader(nil, h); !bytes.Equal(got, want) {
			t.Fatalf("header %x re-encoded as %x", want, got)
		}
		if r, err := ParseREQ(d); err == nil {
			out, err := r.Append(nil)
			if err != nil {
				t.Fatal(err)
			}
			r2, err := ParseREQ(out)
			if err != nil || !equalREQ(r, r2) || r.Alternate != r2.Alternate || !bytes.Equal(r.PrivateData, r2.PrivateData) {
				t.Fatalf("REQ changed in a round trip: %+v -> %+v (%v)", r, r2, err)
			}
		}
		if r, err := ParseREJ(d); err == nil {
			out, err := r.Append(nil)
			if err != nil {
				t.Fatal(err)
			}
			if r2, err := ParseREJ(out); err != nil || r2.Reason != r.Reason || r2.ARI != r.ARI || r2.ARILength != r.ARILength {
				t.Fatalf("REJ changed in a round trip: %+v -> %+v (%v)", r, r2, err)
			}
		}
		for name, parse := range map[string]func([]byte) error{
			"REP":      func(d []byte) error { _, err := ParseREP(d); return err },
			"RTU":      func(d []byte) error { _, err := ParseRTU(d); return err },
			"DREQ":     func(d []byte) error { _, err := ParseDREQ(d); return err },
			"DREP":     func(d []byte) error { _, err := ParseDREP(d); return err },
			"MRA":      func(d []byte) error { _, err := ParseMRA(d); return err },
			"SIDR_REQ": func(d []byte) error { _, err := ParseSIDRREQ(d); return err },
			"SIDR_REP": func(d []byte) error { _, err := ParseSIDRREP(d); return err },
		} {
			if err := parse(d); err != nil {
				t.Fatalf("%s: a %d-byte attribute refused: %v", name, len(d), err)
			}
		}
	})
}
