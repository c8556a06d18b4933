package engine

import "testing"

// TestSharedAdapterTrustsNobody: an adapter of no instance (the default
// instance, shared by every user of the daemon) trusts no adapter, itself
// included, whatever the trust groups say.
func TestSharedAdapterTrustsNobody(t *testing.T) {
	shared := NewAdapter("", "vrdma0", 0, [6]byte{2, 1}, false)
	other := NewAdapter("", "vrdma0", 0, [6]byte{2, 2}, false)
	named := NewAdapter("x", "vrdma0", 0, [6]byte{2, 3}, false)
	for _, b := range []*Adapter{shared, other, named} {
		if shared.Trusts(b) || b.Trusts(shared) {
			t.Errorf("the shared adapter and %q/%s trust each other", b.Instance, b.Name)
		}
	}
	shared.TrustGroup, named.TrustGroup = "g", "g"
	if shared.Trusts(named) {
		t.Error("a trust group made the shared adapter trusted")
	}
}
