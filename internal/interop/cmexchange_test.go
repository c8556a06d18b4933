package interop

import (
	"strings"
	"testing"
)

// TestCMExchangeError runs the rping capture check on MAD sequences seen
// on the wire, among them those of a loaded machine: a REQ sent again
// before the guest, not yet listening, rejected both copies.
func TestCMExchangeError(t *testing.T) {
	const c, s = "10.47.91.254", "10.47.91.1"
	req, rej, rep, rtu := "REQ "+c+">"+s, "REJ "+s+">"+c, "REP "+s+">"+c, "RTU "+c+">"+s
	dreq, drep := "DREQ "+c+">"+s, "DREP "+s+">"+c
	for _, tc := range []struct {
		name string
		seen []string
		want string // "" for no error, else a part of it
	}{
		{"connection", []string{req, rep, rtu, dreq, drep}, ""},
		{"the server disconnects", []string{req, rep, rtu, "DREQ " + s + ">" + c, "DREP " + c + ">" + s}, ""},
		{"one request rejected", []string{req, rej, req, rep, rtu, dreq, drep}, ""},
		{"a rejected request sent again", []string{req, req, rej, rej, req, rep, rtu, dreq, drep}, ""},
		{"the request sent again", []string{req, req, rep, rtu, dreq, drep}, ""},
		{"a busy responder's MRA", []string{req, rej, req, req, "MRA " + s + ">" + c, rep, rtu, dreq, drep}, ""},
		{"an MRA before any REQ", []string{"MRA " + s + ">" + c, rep, rtu, dreq, drep}, "first"},
		{"no DREQ", []string{req, rej, req, rep, rtu}, "want a DREQ"},
		{"DREP only", []string{req, rep, rtu, drep}, "want a DREQ"},
		{"DREP before DREQ", []string{req, rep, rtu, drep, dreq}, "want a DREQ"},
		{"no RTU", []string{req, rep, dreq, drep}, "first"},
		{"no REP", []string{req, rej}, "first"},
		{"something else before the REP", []string{req, rtu, req, rep, rtu, dreq, drep}, "first"},
		{"nothing", nil, "first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := cmExchangeError(tc.seen, c, s)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%q: %v, want no error", tc.seen, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%q: error %v, want one with %q", tc.seen, err, tc.want)
			}
		})
	}
}
