package wire

// PSNMask keeps the 24 bits of a packet sequence number.
const PSNMask = 0xffffff

// PSNAdd returns a+n modulo 2^24; n may be negative.
func PSNAdd(a uint32, n int) uint32 { return (a + uint32(n)) & PSNMask }

// PSNDiff returns a−b as a signed 24-bit serial-number difference, in
// [−2^23, 2^23): positive when a is after b, negative when before, as
// rxe's psn_compare. Only the low 24 bits of a and b count.
func PSNDiff(a, b uint32) int32 { return int32((a-b)<<8) >> 8 }
