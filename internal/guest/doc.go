// Package guest builds and tests the drop-in libibverbs.so.1 and librdmacm.so.1
// (the C sources under csrc/ and csrc/rdmacm/).
package guest

//go:generate go run ./gen/abigen
