package wire

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRCUpdate checks the slicing-by-8 CRC against hash/crc32.
func TestCRCUpdate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 200)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	for n := range len(buf) {
		for _, seed := range []uint32{0, icrcSeed, r.Uint32()} {
			if got, want := crcUpdate(seed, buf[:n]), crc32.Update(seed, crc32.IEEETable, buf[:n]); got != want {
				t.Fatalf("len %d seed %#x: %#x, want %#x", n, seed, got, want)
			}
		}
	}
}
