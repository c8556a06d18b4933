package transport

const psnMask = 0xffffff

// psnDiff returns a−b in 24-bit serial arithmetic: negative when a is
// before b (rxe's psn_compare).
func psnDiff(a, b uint32) int32 { return int32((a-b)<<8) >> 8 }

func psnAdd(a uint32, n uint32) uint32 { return (a + n) & psnMask }
