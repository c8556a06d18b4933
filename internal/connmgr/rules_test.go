package connmgr

import (
	"testing"

	"github.com/vrdma/vrdma/internal/ibcm"
)

func TestDuplicateRules(t *testing.T) {
	for _, tt := range []struct {
		st   state
		want answer
	}{
		{reqRcvd, answerMRA}, {repSent, answerResend}, {established, answerNothing}, {dreqSent, answerNothing},
		{reqSent, answerNothing}, {repRcvd, answerNothing},
	} {
		if got := duplicateREQ(tt.st); got != tt.want {
			t.Errorf("REQ again in %v: %d, want %d", tt.st, got, tt.want)
		}
	}
	for _, tt := range []struct {
		active   bool
		st       state
		fromPeer bool
		want     answer
	}{
		{true, established, true, answerResend},
		{true, established, false, answerNothing}, // another comm ID than the one connected
		{true, repRcvd, true, answerNothing},      // no RTU sent yet: the client is connecting its QP
		{true, dreqSent, true, answerNothing},
		{false, established, true, answerNothing}, // a REP to the responder is no duplicate of anything
	} {
		if got := duplicateREP(tt.active, tt.st, tt.fromPeer); got != tt.want {
			t.Errorf("REP again (active %v, %v, from the peer %v): %d, want %d", tt.active, tt.st, tt.fromPeer, got, tt.want)
		}
	}
}

func TestRetryRules(t *testing.T) {
	for _, tt := range []struct {
		retries, max uint8
		sidr         bool
		want         retryStep
	}{
		{0, 15, false, retrySend}, {14, 15, false, retrySend}, {15, 15, false, retryGiveUp}, {0, 0, false, retryGiveUp},
		{15, 15, true, retrySend},
	} {
		if got := onRetryTimer(tt.retries, tt.max, tt.sidr); got != tt.want {
			t.Errorf("after %d of %d (SIDR %v): %d, want %d", tt.retries, tt.max, tt.sidr, got, tt.want)
		}
	}
	for _, tt := range []struct {
		what   uint8
		active bool
		st     state
		want   bool
	}{
		{ibcm.MsgREQ, true, reqSent, true}, {ibcm.MsgREP, false, repSent, true},
		{ibcm.MsgREQ, false, repSent, false}, {ibcm.MsgREP, true, reqSent, false}, {ibcm.MsgREQ, true, repRcvd, false},
		{ibcm.MsgOther, true, reqSent, false},
	} {
		if got := mraApplies(tt.what, tt.active, tt.st); got != tt.want {
			t.Errorf("MRA of %d (active %v, %v): %v, want %v", tt.what, tt.active, tt.st, got, tt.want)
		}
	}
	for _, tt := range []struct {
		ari  []byte
		mtu  uint8
		want uint8
		ok   bool
	}{
		{[]byte{3}, 5, 3, true}, {[]byte{5}, 5, 0, false}, {nil, 5, 0, false}, {[]byte{0}, 5, 0, false}, {[]byte{3, 0}, 5, 0, false},
	} {
		if got, ok := mtuRetry(tt.ari, tt.mtu); got != tt.want || ok != tt.ok {
			t.Errorf("mtuRetry(%v, %d) = %d, %v; want %d, %v", tt.ari, tt.mtu, got, ok, tt.want, tt.ok)
		}
	}
	for _, tt := range []struct {
		ari  []byte
		mtu  uint8
		want bool
	}{
		{[]byte{3}, 3, true}, {[]byte{3}, 5, false}, {nil, 3, false}, {[]byte{3, 3}, 3, false},
	} {
		if got := lateMTURejection(tt.ari, tt.mtu); got != tt.want {
			t.Errorf("lateMTURejection(%v, %d) = %v, want %v", tt.ari, tt.mtu, got, tt.want)
		}
	}
	if d := cmTime(18); d.Milliseconds() != 1073 {
		t.Errorf("cmTime(18) = %v, want 4.096 µs·2^18 ≈ 1.07 s", d)
	}
}
