package abiheader

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vrdma/vrdma/internal/abi"
)

func TestNamed(t *testing.T) {
	tests := []struct {
		v    fmt.Stringer
		want bool
	}{
		{abi.StatusRemAccessErr, true},
		{abi.Status(22), false},
		{abi.WCRecvRDMAImm, true},
		{abi.WCBindMW, true},
		{abi.WCOpcode(7), false},
		{abi.EventGIDChange, true},
		{abi.EventType(6), false},
		{abi.AccessRemoteAtomic, true},
		{abi.AccessMWBind, true},
		{abi.Access(0x20), false},
		{abi.Access(0), false},
		{abi.AccessLocalWrite | abi.AccessRemoteRead, false},
		{abi.MTU4096, true},
		{abi.MTU(6), false},
	}
	for _, tt := range tests {
		if got := named(tt.v); got != tt.want {
			t.Errorf("named(%q) = %v, want %v", tt.v.String(), got, tt.want)
		}
	}
}

func TestUniqueRefusesDuplicates(t *testing.T) {
	groups := []group{{"a", []define{{"VRDMA_X", 1, false}}}, {"b", []define{{"VRDMA_X", 2, false}}}}
	if err := unique(groups, nil); err == nil || !strings.Contains(err.Error(), "VRDMA_X") {
		t.Errorf("unique of a name defined twice: %v", err)
	}
	checks := []checkGroup{{"c", []check{{"IBV_WC_SEND", 0}}}, {"d", []check{{"IBV_WC_SEND", 0}}}}
	if err := unique(nil, checks); err == nil {
		t.Error("unique accepted a name checked twice")
	}
}

func TestGenerateIsStable(t *testing.T) {
	a, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Fatal("two runs of Generate differ")
	}
}
