package verbs

import (
	"fmt"
	"strings"
)

// Device is one port of an opened rdma-core device, through its helper.
type Device struct {
	Name string
	Port uint8
	Attr DeviceAttr
	h    *Helper
	req  []byte
	dp   dataPath // the data path's request buffer (datapath.go)
	f    faults   // the event and gone handlers (async.go)
	cm   deviceCM // the connection manager's event socket (cm.go)
}

// OpenDevice asks the helper to open port of device name. The helper is
// the device's from then on: Close closes both. A device rdma-core does not
// know is an *Error of kind ErrNoDevice that lists the ones it knows.
func OpenDevice(h *Helper, name string, port uint8) (*Device, error) {
	if name == "" || len(name) > maxName || strings.ContainsAny(name, "/ \t\n\x00") {
		return nil, &Error{Kind: ErrNoDevice, Msg: fmt.Sprintf("%q is no device name (at most %d characters, no '/' or space): `ibv_devices` lists them", name, maxName)}
	}
	if port == 0 {
		port = 1
	}
	body, err := h.Call(AppendOpen(nil, 0, name, port))
	if err != nil {
		if e, ok := err.(*Error); ok && e.Kind == ErrNoDevice {
			have := "it has none"
			if e.Msg != "" {
				have = "it has " + e.Msg
			}
			return nil, &Error{Kind: ErrNoDevice, Errno: e.Errno, Msg: fmt.Sprintf("rdma-core has no device %s (%s; `ibv_devices` lists them, `rdma link add` makes a Soft-RoCE one)", name, have)}
		}
		if e, ok := err.(*Error); ok && e.Kind == ErrDevice && e.Errno == 34 { // ERANGE: no such port
			return nil, &Error{Kind: ErrNoDevice, Errno: e.Errno, Msg: fmt.Sprintf("%s has no port %d: %s", name, port, e.Msg)}
		}
		return nil, err
	}
	a, err := ParseDeviceAttr(body)
	if err != nil {
		h.mu.Lock()
		h.failLocked(err)
		h.mu.Unlock()
		return nil, err
	}
	if uint32(port) > a.PhysPortCnt {
		err := protoErrorf("opened port %d of a %d-port device", port, a.PhysPortCnt)
		h.mu.Lock()
		h.failLocked(err)
		h.mu.Unlock()
		return nil, err
	}
	return &Device{Name: name, Port: port, Attr: a, h: h, req: AppendHeader(nil, OpQueryPort, 0, 0, 0)}, nil
}

// QueryPort returns the port's state and GID table as the device has them
// now.
func (d *Device) QueryPort() (PortAttr, error) {
	body, err := d.h.Call(d.req)
	if err != nil {
		return PortAttr{}, err
	}
	p, err := ParsePortAttr(body)
	if err != nil {
		d.h.mu.Lock()
		d.h.failLocked(err)
		d.h.mu.Unlock()
	}
	return p, err
}

// RegMR registers length bytes at offset (page-aligned) of the memfd fd
// with the device, over the helper's own MAP_SHARED mapping of it: the
// device reads and writes the very pages the application and the daemon
// map, and knows them by the addresses from iova on (the application's).
// The data path's registrations: docs/design/verbs-uplink-datapath.md.
func (d *Device) RegMR(fd int, offset, length uint64, access uint32, iova uint64) (MR, error) {
	body, err := d.h.CallFD(AppendRegMR(nil, 0, offset, length, access, iova), fd)
	if err != nil {
		return MR{}, err
	}
	m, err := ParseMR(body)
	if err != nil {
		d.h.mu.Lock()
		d.h.failLocked(err)
		d.h.mu.Unlock()
	}
	if err == nil {
		m.IOVA = iova
	}
	return m, err
}

// DeregMR deregisters a region RegMR registered.
func (d *Device) DeregMR(m MR) error {
	_, err := d.h.Call(ne.AppendUint32(AppendHeader(nil, OpDeregMR, 0, 0, 4), m.Handle))
	return err
}

// Close closes the device and stops its helper.
func (d *Device) Close() { d.h.Close() }

// LinkLayerName names a link layer as ibv_devinfo prints it.
func LinkLayerName(l uint32) string {
	switch l {
	case LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return "Unspecified"
}

// GIDTypeName names a GID type as ibv_devinfo -v prints it.
func GIDTypeName(t uint32) string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("type %d", t)
}

// PortStateName names a port state as ibv_devinfo prints it.
func PortStateName(s uint32) string {
	names := []string{"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("state %d", s)
}

// TransportName names a transport as ibv_devinfo prints it.
func TransportName(t int32) string {
	switch t {
	case TransportIB:
		return "InfiniBand"
	case TransportIWARP:
		return "iWARP"
	case TransportUSNIC:
		return "usNIC"
	case TransportUSNICUDP:
		return "usNIC UDP"
	case TransportUnknown:
		return "unknown"
	case TransportUnspecified:
		return "unspecified"
	}
	return fmt.Sprintf("transport %d", t)
}
