//go:build stacks

package stacks

// fullMatrix is true under `go test -tags stacks`: every program, transport
// and size of the matrix runs, not CI's subset.
const fullMatrix = true
