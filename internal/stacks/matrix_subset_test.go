//go:build !stacks

package stacks

// fullMatrix is false in the default run (CI): a representative subset of
// each stack runs. `go test -tags stacks` runs the full matrix.
const fullMatrix = false
