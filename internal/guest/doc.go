// Package guest builds and tests the drop-in libibverbs.so.1 (the C sources under csrc/).
package guest
