package switchagent

import "testing"

// TestOlderDaemonsRecordTrusted: the signed record of an older daemon,
// which announced its connection manager's TCP listener (cmEndpoint), is
// still taken whole, while this daemon's own record announces none.
func TestOlderDaemonsRecordTrusted(t *testing.T) {
	dir := pkiFor(t, "host1", "host2", "host3")
	as := pair(t, dir)
	h1 := as[0]
	m3, rec := member3(t, dir, "127.0.0.3")
	if rec.CMEndpoint == "" {
		t.Fatal("the older daemon's record has no CM endpoint")
	}
	writeAs(t, h1, m3, rec)
	waitUntil(t, "host1 has host3's record", func() bool { _, ok := h1.hostNamed("host3"); return ok })
	if h, _ := h1.hostNamed("host3"); !contains(h.Addrs, "127.0.0.3") {
		t.Errorf("host1 took host3's record with addresses %v, want 127.0.0.3", h.Addrs)
	}
	if own := h1.Record(); own.CMEndpoint != "" {
		t.Errorf("this daemon's record announces a CM endpoint %q", own.CMEndpoint)
	}
}
