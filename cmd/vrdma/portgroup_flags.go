package main

import (
	"fmt"
	"strconv"
	"strings"
)

// The port group's flags check their values as they are parsed, so a bad
// one is a usage error naming the flag and the fix; the daemon checks
// them again.

// rangeFlag is a decimal number from 0 to max.
type rangeFlag struct {
	what, fix string
	max       uint64
	n         uint64
}

func (f *rangeFlag) String() string {
	if f == nil {
		return "0"
	}
	return strconv.FormatUint(f.n, 10)
}

func (f *rangeFlag) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%s %q is not a number: %s", f.what, s, f.fix)
	}
	if n > f.max {
		return fmt.Errorf("%s %d is out of range: %s", f.what, n, f.fix)
	}
	f.n = n
	return nil
}

// mtuFlag is a RoCE path MTU; 0 leaves the switch's default.
type mtuFlag int

func (f *mtuFlag) String() string {
	if f == nil || *f == 0 {
		return ""
	}
	return strconv.Itoa(int(*f))
}

func (f *mtuFlag) Set(s string) error {
	switch n, _ := strconv.Atoi(s); n {
	case 256, 512, 1024, 2048, 4096:
		*f = mtuFlag(n)
		return nil
	}
	return fmt.Errorf("MTU %q: give 256, 512, 1024, 2048 or 4096 (the RoCE MTU, not the Ethernet MTU: Ethernet 1500 carries 1024, 9000 carries 4096)", s)
}

// pkeyFlag is a partition key, hex with 0x or decimal; 0 leaves the
// switch's default (0xffff).
type pkeyFlag uint16

func (f *pkeyFlag) String() string {
	if f == nil || *f == 0 {
		return ""
	}
	return fmt.Sprintf("0x%04x", uint16(*f))
}

func (f *pkeyFlag) Set(s string) error {
	const fix = "give 0xffff for the default partition, 0x8001-0xfffe (full member) or 0x0001-0x7fff (limited member)"
	var n uint64
	var err error
	if h, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		n, err = strconv.ParseUint(h, 16, 16)
	} else {
		n, err = strconv.ParseUint(s, 10, 16)
	}
	switch {
	case err != nil:
		return fmt.Errorf("P_Key %q is not a 16-bit number: %s", s, fix)
	case n&0x7fff == 0:
		return fmt.Errorf("P_Key 0x%04x has no partition number (its low 15 bits are zero): %s", n, fix)
	}
	*f = pkeyFlag(n)
	return nil
}
