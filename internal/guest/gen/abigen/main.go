// Command abigen writes vrdma_abi.h, the C view of internal/abi and
// internal/proto, for the guest library. `go generate ./internal/guest` runs
// it in internal/guest:
//
//	go run ./gen/abigen [-o csrc/vrdma_abi.h]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/vrdma/vrdma/internal/guest/abiheader"
)

func main() {
	out := flag.String("o", "csrc/vrdma_abi.h", "the header to write")
	flag.Parse()
	b, err := abiheader.Generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "abigen:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "abigen:", err)
		os.Exit(1)
	}
}
