package main

import (
	"log/slog"
	"os"

	"github.com/vrdma/vrdma/internal/guest"
)

// deviceNode makes /dev/infiniband/vrdma, which programs such as UCX look
// for before they use a device (docs/design/device-discovery.md), when the
// daemon runs as root; a daemon that is not root says how to make it once.
func deviceNode(log *slog.Logger) {
	if os.Geteuid() != 0 {
		if guest.DeviceNodeMissing() {
			log.Warn("UCX and Open MPI will not see vrdma's devices until root makes their node once: sudo vrdma guest build --out DIR (or run the daemon as root)", "node", guest.DeviceNode)
		}
		return
	}
	if err := guest.EnsureDeviceNode(); err != nil {
		log.Warn("programs such as UCX will not see vrdma's devices", "err", err)
	}
}
