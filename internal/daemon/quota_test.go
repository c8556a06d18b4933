package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/proto"
)

func testLedger() *ledger {
	var user, inst limitSet
	for r := range numResources {
		user[r], inst[r] = 4, 3
	}
	return newLedger(user, inst)
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
