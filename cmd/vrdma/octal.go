package main

import (
	"fmt"
	"strconv"
)

// octalFlag is a flag of permission bits, shown in octal (0660) as chmod
// takes them; it takes them as chmod does too (660 and 0660 are the same)
// and 0o660, 0x1b0 as Go writes them.
type octalFlag uint32

func (m *octalFlag) String() string { return fmt.Sprintf("%#o", uint32(*m)) }

func (m *octalFlag) Set(s string) error {
	base := 8
	if len(s) > 1 && s[0] == '0' && (s[1] == 'o' || s[1] == 'O' || s[1] == 'x' || s[1] == 'X') {
		base = 0
	}
	v, err := strconv.ParseUint(s, base, 32)
	if err != nil || v > 0o7777 {
		return fmt.Errorf("%q: give permission bits in octal, 0 to 7777 (0660: owner and group may connect)", s)
	}
	*m = octalFlag(v)
	return nil
}
