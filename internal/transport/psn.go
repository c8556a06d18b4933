package transport

import "github.com/vrdma/vrdma/internal/wire"

const psnMask = wire.PSNMask

// psnDiff returns a−b in 24-bit serial arithmetic: negative when a is
// before b.
func psnDiff(a, b uint32) int32 { return wire.PSNDiff(a, b) }

func psnAdd(a uint32, n uint32) uint32 { return wire.PSNAdd(a, int(n)) }
