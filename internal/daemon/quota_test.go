package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/proto"
)

func testLedger() *ledger {
	var user, inst, total limitSet
	for r := range numResources {
		user[r], inst[r], total[r] = 4, 3, Unlimited
	}
	return newLedger(user, inst, total)
}

// TestLedgerChargesBothOrNeither: a charge goes to the uid and the
// instance, or, when either is at its limit, to neither; the refusal names
// the account, the limit, the count and the flag that raises it.
func TestLedgerChargesBothOrNeither(t *testing.T) {
	l := testLedger()
	u := l.join(1000)
	inst := l.instanceAccount("vm1")
	var held limitSet
	for i := 0; i < 3; i++ {
		if err := l.charge(&held, QPs, 1, u, inst); err != nil {
			t.Fatalf("qp %d: %v", i, err)
		}
	}
	err := l.charge(&held, QPs, 1, u, inst)
	var pe *proto.Error
	if !errors.As(err, &pe) || pe.Code != proto.CodeLimit {
		t.Fatalf("the 4th qp in an instance limited to 3: %v", err)
	}
	for _, want := range []string{"instance vm1", "holds 3 queue pairs", "3 allowed", "qp=3", "--instance-limit qp=N"} {
		if !strings.Contains(pe.Message, want) {
			t.Errorf("refusal %q lacks %q", pe.Message, want)
		}
	}
	if got := l.usedBy(1000)[QPs]; got != 3 || held[QPs] != 3 || l.usage(inst)[QPs] != 3 {
		t.Fatalf("after a refusal: uid %d, held %d, instance %d; want 3 each", got, held[QPs], l.usage(inst)[QPs])
	}
	// The uid's own limit (4) binds outside the instance.
	if err := l.charge(&held, QPs, 1, u, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.charge(&held, QPs, 1, u, nil); err == nil || !strings.Contains(err.Error(), "uid 1000 holds 4") || !strings.Contains(err.Error(), "--limit qp=N") {
		t.Fatalf("the 5th qp of a uid limited to 4: %v", err)
	}
	l.release(&held, QPs, 1, u, nil)
	l.releaseAll(&held, u, inst)
	if got := l.usedBy(1000); got != (limitSet{}) || held != (limitSet{}) || l.usage(inst) != (limitSet{}) {
		t.Fatalf("after releasing everything: uid %v, held %v, instance %v", got, held, l.usage(inst))
	}
	l.leave(1000, u)
	if len(l.users) != 0 {
		t.Fatalf("a uid that holds nothing is still known: %v", l.users)
	}
}

// TestLedgerLockedBytes: bytes are charged like counts, and the refusal
// says bytes.
func TestLedgerLockedBytes(t *testing.T) {
	l := testLedger()
	l.user[Locked] = 1 << 20
	u := l.join(7)
	if err := l.charge(nil, Locked, 1<<20, u); err != nil {
		t.Fatal(err)
	}
	err := l.charge(nil, Locked, 1, u)
	if err == nil || !strings.Contains(err.Error(), "1048576 bytes of registered memory locked") || !strings.Contains(err.Error(), "--limit locked=BYTES") {
		t.Fatalf("one byte past the limit: %v", err)
	}
	l.release(nil, Locked, 1<<20, u)
	if err := l.charge(nil, Locked, Unlimited, u); err == nil {
		t.Fatal("a charge of 2^64-1 bytes passed")
	}
}

// TestLedgerTotalBindsEveryUid: what every uid holds is also the daemon's
// total, and a charge that would take the total past its limit is refused
// whichever uid makes it, naming the daemon-wide limit and its flag; the
// uids' own counts are left as they were. Many uids (subordinate uids of
// rootless containers, say) each with a fresh quota cannot together pass it.
func TestLedgerTotalBindsEveryUid(t *testing.T) {
	l := testLedger()
	l.user[Locked] = 1 << 20
	l.all[Locked] = 3 << 19 // 1.5 MiB: one and a half uids' worth
	l.inst[Locked] = Unlimited
	a, b := l.join(1000), l.join(100000)
	inst := l.instanceAccount("vm")
	var heldA, heldB limitSet
	if err := l.charge(&heldA, Locked, 1<<20, a, nil); err != nil {
		t.Fatal(err)
	}
	err := l.charge(&heldB, Locked, 1<<20, b, inst)
	var pe *proto.Error
	if !errors.As(err, &pe) || pe.Code != proto.CodeLimit {
		t.Fatalf("a second uid's 1 MiB past a 1.5 MiB total: %v", err)
	}
	for _, want := range []string{"all tenants together", "1048576 bytes of registered memory locked", "limit locked=1572864", "--total-limit locked=BYTES"} {
		if !strings.Contains(pe.Message, want) {
			t.Errorf("refusal %q lacks %q", pe.Message, want)
		}
	}
	if l.usedBy(100000)[Locked] != 0 || heldB[Locked] != 0 || l.usage(inst)[Locked] != 0 {
		t.Fatalf("a refused charge stuck: uid %d, held %d, instance %d", l.usedBy(100000)[Locked], heldB[Locked], l.usage(inst)[Locked])
	}
	if err := l.charge(&heldB, Locked, 1<<19, b, inst); err != nil {
		t.Fatalf("the half MiB left: %v", err)
	}
	if got := l.usage(l.total)[Locked]; got != 3<<19 {
		t.Fatalf("total %d, want %d", got, 3<<19)
	}
	// An instance's charge alone (a session attaching) is not the uid's, and
	// not counted twice in the total.
	if err := l.charge(nil, Sessions, 1, inst); err != nil {
		t.Fatal(err)
	}
	if got := l.usage(l.total)[Sessions]; got != 0 {
		t.Fatalf("an instance-only charge reached the total: %d", got)
	}
	l.release(&heldA, Locked, 1<<20, a, nil)
	l.releaseAll(&heldB, b, inst)
	if got := l.usage(l.total); got != (limitSet{}) {
		t.Fatalf("total after everything was given back: %v", got)
	}
}

// TestLedgerReleaseNeverUnderflows: giving back more than was taken (a
// bug) leaves zero, not 2^64-1.
func TestLedgerReleaseNeverUnderflows(t *testing.T) {
	l := testLedger()
	u := l.join(1)
	var held limitSet
	_ = l.charge(&held, CQs, 1, u)
	l.release(&held, CQs, 5, u)
	if l.usedBy(1)[CQs] != 0 || held[CQs] != 0 {
		t.Fatalf("used %d, held %d", l.usedBy(1)[CQs], held[CQs])
	}
	if err := l.charge(&held, CQs, 4, u); err != nil {
		t.Fatalf("the whole limit after an over-release: %v", err)
	}
}

// TestLedgerAccountsLiveWhileHeld: an account joined twice lives until
// both leave.
func TestLedgerAccountsLiveWhileHeld(t *testing.T) {
	l := testLedger()
	a, b := l.join(5), l.join(5)
	if a != b {
		t.Fatal("two accounts for one uid")
	}
	_ = l.charge(nil, Sessions, 2, a)
	l.leave(5, a)
	if l.usedBy(5)[Sessions] != 2 {
		t.Fatal("the account went with its first holder")
	}
	l.release(nil, Sessions, 2, b)
	l.leave(5, b)
	if _, ok := l.users[5]; ok {
		t.Fatal("the account outlived its holders")
	}
}

// BenchmarkLedgerChargeRelease is what the quota adds to creating and
// destroying an object.
func BenchmarkLedgerChargeRelease(b *testing.B) {
	l := testLedger()
	l.user[QPs], l.inst[QPs] = Unlimited, Unlimited
	u, inst := l.join(1000), l.instanceAccount("vm")
	var held limitSet
	b.ReportAllocs()
	for b.Loop() {
		if err := l.charge(&held, QPs, 1, u, inst); err != nil {
			b.Fatal(err)
		}
		l.release(&held, QPs, 1, u, inst)
	}
}
