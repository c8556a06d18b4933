package pathsel

import (
	"errors"
	"fmt"
	"syscall"
)

// Request is what an instance asks of a path: the QP type and the limits
// its QPs are created and connected with. The zero Request asks nothing
// beyond an RC QP with one SGE, no SRQ and no inline data.
type Request struct {
	UD        bool // UD QPs (datagrams)
	SRQ       bool // QPs on a shared receive queue
	Atomics   bool // atomic operations (compare-and-swap, fetch-and-add)
	MaxInline int  // bytes of inline data per send WR (max_inline_data)
	MaxSGE    int  // scatter/gather entries per WR (max_send_sge, max_recv_sge)
	MTU       int  // the path MTU in bytes (the port group's)
}

// IsZero reports whether r asks nothing.
func (r Request) IsZero() bool { return r == Request{} }

// ErrDeviceLacks is matched by a *LackError: a device cannot do what an
// instance asks.
var ErrDeviceLacks = errors.New("the RDMA device lacks what the instance asks for")

// LackError is what a verbs uplink's device cannot do of a Request, with
// the error rdma-core would give the instance's ibv_create_qp or
// ibv_modify_qp on it (errors.Is matches Errno too).
type LackError struct {
	Host, Uplink, Device, Kind string
	What                       string // "UD QPs", "atomics", "max_sge", "max_inline_data", "path MTU"
	Asked, Has                 int    // for the limits
	Errno                      syscall.Errno
	Fix                        string
}

func (e *LackError) Error() string {
	dev := fmt.Sprintf("%s (%s, %s) on host %s", e.Uplink, e.Device, e.Kind, e.Host)
	var s string
	switch e.What {
	case "UD QPs", "atomics":
		s = fmt.Sprintf("%s has no %s", dev, e.What)
	default:
		s = fmt.Sprintf("%s takes %s %d, the instance asks for %d", dev, e.What, e.Has, e.Asked)
	}
	return fmt.Sprintf("%s: %s would fail with %s (%v); %s", s, lackCall(e.What), errnoName(e.Errno), e.Errno, e.Fix)
}

// Is makes errors.Is match ErrDeviceLacks and the errno.
func (e *LackError) Is(target error) bool { return target == ErrDeviceLacks || target == e.Errno }

func lackCall(what string) string {
	if what == "path MTU" || what == "atomics" {
		return "ibv_modify_qp"
	}
	return "ibv_create_qp"
}

func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.EOPNOTSUPP:
		return "EOPNOTSUPP"
	case syscall.EINVAL:
		return "EINVAL"
	}
	return fmt.Sprintf("errno %d", int(e))
}

// CheckDevice returns the first thing port's device cannot do of r (in the
// order UD, atomics, path MTU, max_sge, max_inline_data) as a *LackError,
// or nil. host names port's host in the message. What the device's record
// does not say (an inline limit not probed yet, 0) is not checked here:
// ibv_create_qp refuses it on the device with EINVAL.
func CheckDevice(host string, p Port, r Request) error {
	lack := func(what string, asked, has int, errno syscall.Errno, fix string) error {
		return &LackError{Host: host, Uplink: p.Name, Device: p.Device, Kind: p.Kind, What: what, Asked: asked, Has: has, Errno: errno, Fix: fix}
	}
	switch {
	case r.UD && p.Kind == IWARP:
		return lack("UD QPs", 0, 0, syscall.EOPNOTSUPP, "iWARP carries RC only: use RC QPs, or a RoCE or InfiniBand uplink")
	case r.Atomics && !p.Atomics:
		return lack("atomics", 0, 0, syscall.EOPNOTSUPP, "the device's atomic_cap is IBV_ATOMIC_NONE (iWARP has none): leave atomics out, or use a device with atomic_cap HCA or GLOB")
	case r.MTU > 0 && p.MTU > 0 && r.MTU > p.MTU:
		return lack("path MTU", r.MTU, p.MTU, syscall.EINVAL, fmt.Sprintf("give the port group MTU %d or less (vrdma portgroup add), or raise the device's netdev MTU", p.MTU))
	case r.MaxSGE > 0 && p.MaxSGE > 0 && r.MaxSGE > p.MaxSGE:
		return lack("max_sge", r.MaxSGE, p.MaxSGE, syscall.EINVAL, fmt.Sprintf("ask for %d SGEs or fewer per WR", p.MaxSGE))
	case r.MaxInline > 0 && p.MaxInline > 0 && r.MaxInline > p.MaxInline:
		return lack("max_inline_data", r.MaxInline, p.MaxInline, syscall.EINVAL, fmt.Sprintf("ask for %d bytes of inline data or fewer", p.MaxInline))
	}
	return nil
}
