package uplink

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Errors a Link reports; match them with errors.Is. The typed errors below
// carry the details and match these.
var (
	ErrNoNetdev   = errors.New("uplink: no such network interface")
	ErrPortBusy   = errors.New("uplink: the RoCEv2 UDP port is taken")
	ErrPermission = errors.New("uplink: raw sockets need CAP_NET_RAW")
	ErrConfig     = errors.New("uplink: invalid configuration")
	ErrBadFrame   = errors.New("uplink: malformed frame")
	ErrDown       = errors.New("uplink: the link's network interface is gone")
	ErrClosed     = errors.New("uplink: link closed")
	ErrServing    = errors.New("uplink: Serve is already running")
)

// NetdevError says a network interface does not exist, and which do.
type NetdevError struct {
	Name string
	Have []string // the interfaces that exist, in the link's network namespace
}

func (e *NetdevError) Error() string {
	return fmt.Sprintf("no network interface %q here: the interfaces are %s (`ip link` lists them)", e.Name, strings.Join(e.Have, ", "))
}

// Is makes a *NetdevError match ErrNoNetdev.
func (e *NetdevError) Is(target error) bool { return target == ErrNoNetdev }

// PortBusyError says the RoCEv2 port cannot be bound on an address.
type PortBusyError struct {
	Addr netip.Addr
	Port uint16
}

func (e *PortBusyError) Error() string {
	return fmt.Sprintf("UDP port %d on %v is taken: most likely by the kernel's Soft-RoCE (rdma_rxe: `rdma link show` lists its links, "+
		"`rdma link delete NAME` or `modprobe -r rdma_rxe` frees the port), a RoCE NIC driver, or another vrdma daemon (`ss -uanp sport = :%d`)",
		e.Port, e.Addr, e.Port)
}

// Is makes a *PortBusyError match ErrPortBusy.
func (e *PortBusyError) Is(target error) bool { return target == ErrPortBusy }

// FrameError says why WriteBatch refused frame Index of a batch.
type FrameError struct {
	Index  int
	Reason string
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("uplink: frame %d: %s", e.Index, e.Reason)
}

// Is makes a *FrameError match ErrBadFrame.
func (e *FrameError) Is(target error) bool { return target == ErrBadFrame }
