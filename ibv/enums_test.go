package ibv

import (
	"fmt"
	"testing"
)

func TestMTU(t *testing.T) {
	tests := []struct {
		m     MTU
		bytes int
		valid bool
		str   string
	}{
		{0, 0, false, "MTU(0)"},
		{MTU256, 256, true, "256"},
		{MTU512, 512, true, "512"},
		{MTU1024, 1024, true, "1024"},
		{MTU2048, 2048, true, "2048"},
		{MTU4096, 4096, true, "4096"},
		{6, 0, false, "MTU(6)"},
		{255, 0, false, "MTU(255)"},
	}
	for _, tt := range tests {
		if got := tt.m.Bytes(); got != tt.bytes {
			t.Errorf("MTU(%d).Bytes() = %d, want %d", uint8(tt.m), got, tt.bytes)
		}
		if got := tt.m.Valid(); got != tt.valid {
			t.Errorf("MTU(%d).Valid() = %v, want %v", uint8(tt.m), got, tt.valid)
		}
		if got := tt.m.String(); got != tt.str {
			t.Errorf("MTU(%d).String() = %q, want %q", uint8(tt.m), got, tt.str)
		}
	}
	for _, c := range []struct {
		n    int
		want MTU
	}{
		{-1, 0}, {0, 0}, {255, 0}, {256, MTU256}, {511, MTU256}, {512, MTU512}, {1023, MTU512},
		{1024, MTU1024}, {1500, MTU1024}, {2048, MTU2048}, {4095, MTU2048}, {4096, MTU4096}, {9000, MTU4096},
	} {
		if got := MTUFromBytes(c.n); got != c.want {
			t.Errorf("MTUFromBytes(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

func TestRNRTimer(t *testing.T) {
	// IBTA table 45, in microseconds.
	want := [32]float64{
		655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
		2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
	}
	for v := 0; v < 32; v++ {
		if got := RNRTimer(uint8(v)); got != int64(want[v]*1000) {
			t.Errorf("RNRTimer(%d) = %d ns, want %v µs", v, got, want[v])
		}
	}
	for v := 1; v < 31; v++ {
		if RNRTimer(uint8(v)) >= RNRTimer(uint8(v+1)) {
			t.Errorf("RNRTimer is not increasing at %d", v)
		}
	}
	for _, v := range []uint8{32, 100, 255} {
		if got := RNRTimer(v); got != 0 {
			t.Errorf("RNRTimer(%d) = %d, want 0 for an out-of-range value", v, got)
		}
	}
}

func TestAckTimeout(t *testing.T) {
	tests := []struct {
		v    uint8
		want int64
	}{
		{0, 0}, // infinite
		{1, 8192},
		{2, 16384},
		{14, 4096 << 14}, // ~67 ms
		{31, 4096 << 31},
		{32, 0},
		{255, 0},
	}
	for _, tt := range tests {
		if got := AckTimeout(tt.v); got != tt.want {
			t.Errorf("AckTimeout(%d) = %d, want %d", tt.v, got, tt.want)
		}
	}
	for v := uint8(1); v <= 31; v++ {
		if AckTimeout(v) <= 0 {
			t.Errorf("AckTimeout(%d) = %d overflows", v, AckTimeout(v))
		}
	}
}

func TestOpcodeProperties(t *testing.T) {
	tests := []struct {
		op     Opcode
		name   string
		atomic bool
		wc     WCOpcode
	}{
		{WRRDMAWrite, "RDMA_WRITE", false, WCRDMAWrite},
		{WRRDMAWriteImm, "RDMA_WRITE_WITH_IMM", false, WCRDMAWrite},
		{WRSend, "SEND", false, WCSend},
		{WRSendImm, "SEND_WITH_IMM", false, WCSend},
		{WRRDMARead, "RDMA_READ", false, WCRDMARead},
		{WRAtomicCmpAndSwp, "ATOMIC_CMP_AND_SWP", true, WCCompSwap},
		{WRAtomicFetchAndAdd, "ATOMIC_FETCH_AND_ADD", true, WCFetchAdd},
	}
	for _, tt := range tests {
		if !tt.op.Valid() {
			t.Errorf("%v not valid", tt.op)
		}
		if got := tt.op.String(); got != tt.name {
			t.Errorf("Opcode(%d).String() = %q, want %q", uint8(tt.op), got, tt.name)
		}
		if got := tt.op.IsAtomic(); got != tt.atomic {
			t.Errorf("%v.IsAtomic() = %v", tt.op, got)
		}
		if got := tt.op.CompletionOpcode(); got != tt.wc {
			t.Errorf("%v.CompletionOpcode() = %v, want %v", tt.op, got, tt.wc)
		}
	}
	for _, op := range []Opcode{10, 11, 200, 255} {
		if op.Valid() {
			t.Errorf("Opcode(%d) valid", uint8(op))
		}
		if got, want := op.String(), fmt.Sprintf("Opcode(%d)", uint8(op)); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

func TestStringMethods(t *testing.T) {
	tests := []struct {
		v    fmt.Stringer
		want string
	}{
		{WCSend, "SEND"}, {WCRDMAWrite, "RDMA_WRITE"}, {WCRDMARead, "RDMA_READ"}, {WCCompSwap, "COMP_SWAP"},
		{WCFetchAdd, "FETCH_ADD"}, {WCRecv, "RECV"}, {WCRecvRDMAImm, "RECV_RDMA_WITH_IMM"}, {WCBindMW, "BIND_MW"}, {WCLocalInv, "LOCAL_INV"}, {WCOpcode(7), "WCOpcode(7)"},
		{WCOpcode(255), "WCOpcode(255)"},

		{WCSuccess, "SUCCESS"}, {WCLocLenErr, "LOC_LEN_ERR"}, {WCLocQPOpErr, "LOC_QP_OP_ERR"},
		{WCLocProtErr, "LOC_PROT_ERR"}, {WCWRFlushErr, "WR_FLUSH_ERR"}, {WCRemAccessErr, "REM_ACCESS_ERR"},
		{WCRetryExcErr, "RETRY_EXC_ERR"}, {WCRNRRetryExcErr, "RNR_RETRY_EXC_ERR"},
		{WCRespTimeoutErr, "RESP_TIMEOUT_ERR"}, {WCGeneralErr, "GENERAL_ERR"}, {Status(22), "Status(22)"},
		{Status(255), "Status(255)"},

		{Access(0), "none"}, {AccessLocalWrite, "LOCAL_WRITE"},
		{AccessLocalWrite | AccessRemoteRead, "LOCAL_WRITE|REMOTE_READ"},
		{AccessAll, "LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC|MW_BIND"},
		{AccessRemoteWrite | 0x30, "REMOTE_WRITE|MW_BIND|0x20"},
		{Access(0x100), "|0x100"},

		{RC, "RC"}, {UC, "UC"}, {UD, "UD"}, {QPType(0), "QPType(0)"}, {QPType(5), "QPType(5)"},

		{QPSReset, "RESET"}, {QPSInit, "INIT"}, {QPSRTR, "RTR"}, {QPSRTS, "RTS"},
		{QPSSQD, "SQD"}, {QPSSQE, "SQE"}, {QPSErr, "ERR"}, {QPState(7), "QPState(7)"},

		{EventCQErr, "CQ_ERR"}, {EventQPFatal, "QP_FATAL"}, {EventQPReqErr, "QP_REQ_ERR"},
		{EventQPAccessErr, "QP_ACCESS_ERR"}, {EventCommEst, "COMM_EST"}, {EventSQDrained, "SQ_DRAINED"},
		{EventDeviceFatal, "DEVICE_FATAL"}, {EventPortActive, "PORT_ACTIVE"}, {EventPortErr, "PORT_ERR"},
		{EventSRQErr, "SRQ_ERR"}, {EventSRQLimit, "SRQ_LIMIT_REACHED"}, {EventQPLastWQE, "QP_LAST_WQE_REACHED"},
		{EventGIDChange, "GID_CHANGE"}, {EventType(6), "EventType(6)"}, {EventType(255), "EventType(255)"},
	}
	for _, tt := range tests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%T(%#v).String() = %q, want %q", tt.v, tt.v, got, tt.want)
		}
	}
	// Every known status has a name.
	for s := WCSuccess; s <= WCGeneralErr; s++ {
		if got := s.String(); got == "" || got == fmt.Sprintf("Status(%d)", uint8(s)) {
			t.Errorf("Status %d has no name", uint8(s))
		}
	}
}

func TestQPTypeValid(t *testing.T) {
	for v := 0; v < 256; v++ {
		want := v == 2 || v == 3 || v == 4
		if got := QPType(v).Valid(); got != want {
			t.Errorf("QPType(%d).Valid() = %v", v, got)
		}
	}
}
