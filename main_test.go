package vrdma_test

import (
	"os"
	"testing"

	"github.com/vrdma/vrdma/internal/guest/guesttest"
)

// TestMain removes the guest library the tests built (guesttest.Library
// builds it once for all of them) when they end.
func TestMain(m *testing.M) {
	code := m.Run()
	guesttest.RemoveLibrary()
	os.Exit(code)
}
