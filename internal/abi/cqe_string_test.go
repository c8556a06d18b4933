package abi

import "testing"

func TestCQEString(t *testing.T) {
	c := CQE{WRID: 9, QPNum: 3, Opcode: WCRecv, Status: StatusLocLenErr, ByteLen: 12}
	if got, want := c.String(), "wr_id=9 qp=3 op=RECV status=LOC_LEN_ERR len=12"; got != want {
		t.Errorf("CQE.String() = %q, want %q", got, want)
	}
}
