package engine

// UD QPs and address handles of an adapter bound to a device (device.go):
// the device's UD QP sends the datagrams and receives them (with the
// 40-byte GRH in front of the payload, written by the device into the
// application's buffer); an instance's address handle is one of the
// device's, made with ibv_create_ah when the instance makes its own.

import (
	"fmt"

	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/qpstate"
	"github.com/vrdma/vrdma/internal/verbs"
)

// ControlledQKey is the Q_Key bit that makes a Q_Key controlled (IBTA
// 3.5.3): only a privileged consumer may give a QP one; a UD send naming
// one uses its QP's own Q_Key.
const ControlledQKey = 0x80000000

// CreateDeviceAH makes the device's address handle for the instance's
// address handle handle (of PD p) to av: on RoCE with a GRH (the GID,
// sgid_index, hop limit, traffic class, flow label), on InfiniBand by
// DLID. It is an error on an adapter that is not bound, or for a handle p
// already has.
func (p *PD) CreateDeviceAH(handle uint32, av qpstate.AddressVector) error {
	u := p.adapter.uplink
	if u == nil {
		return fmt.Errorf("adapter %s is not on a verbs uplink", p.adapter.Name)
	}
	p.ahMu.Lock()
	defer p.ahMu.Unlock()
	if _, ok := p.devAHs[handle]; ok {
		return fmt.Errorf("address handle %d is on %s already", handle, u.Name)
	}
	ah, err := u.dev.CreateAH(verbs.AHAttr{DGID: av.DGID, FlowLabel: av.FlowLabel, DLID: av.DLID, SGIDIndex: av.SGIDIndex,
		HopLimit: av.HopLimit, TrafficClass: av.TrafficClass, SL: av.SL, IsGlobal: true})
	if err != nil {
		return fmt.Errorf("an address handle on %s: %w", u.Name, err)
	}
	if p.devAHs == nil {
		p.devAHs = map[uint32]verbs.AH{}
	}
	p.devAHs[handle] = ah
	return nil
}

// DestroyDeviceAH destroys the device's address handle for handle, if p
// has one.
func (p *PD) DestroyDeviceAH(handle uint32) {
	p.ahMu.Lock()
	ah, ok := p.devAHs[handle]
	delete(p.devAHs, handle)
	p.ahMu.Unlock()
	if ok {
		_ = p.adapter.uplink.dev.DestroyAH(ah) // the helper may be gone: nothing is left to free then
	}
}

// deviceAH returns the device's address handle for the instance's handle
// of PD p: an address handle of another PD (or another instance) is not
// found.
func (p *PD) deviceAH(handle uint32) (verbs.AH, bool) {
	p.ahMu.Lock()
	ah, ok := p.devAHs[handle]
	p.ahMu.Unlock()
	return ah, ok
}

// modifyUD moves the device UD QP to `to`: INIT with the Q_Key,
// RTS with the send PSN.
func (d *devQP) modifyUD(to abi.QPState, a *qpstate.Attr) error {
	q := d.q
	if err := d.u.dev.ModifyUDQP(d.qp, uint32(to), a.QKey, a.SQPSN); err != nil {
		return fmt.Errorf("UD QP %#x on %s to %v: %w", q.qpn, d.u.Name, to, err)
	}
	return nil
}

// udSendWR translates a UD send request for the device: false with the
// status it completes with when it cannot go (an address handle that is
// not the QP's PD's on the device, an opcode other than SEND).
func (d *devQP) udSendWR(w *abi.SendWQE, sg []verbs.SGE, flags uint32) (verbs.UDSendWR, abi.Status) {
	if w.Opcode != abi.OpSend && w.Opcode != abi.OpSendImm {
		return verbs.UDSendWR{}, abi.StatusLocQPOpErr
	}
	ah, ok := d.q.pd.deviceAH(w.AH)
	if !ok {
		return verbs.UDSendWR{}, abi.StatusLocQPOpErr
	}
	return verbs.UDSendWR{WRID: w.WRID, Opcode: uint32(w.Opcode), Flags: flags &^ uint32(abi.SendFence), Imm: immToDevice(w), SGEs: sg,
		AH: ah.Handle, RemoteQPN: w.RemoteQPN & 0xffffff, RemoteQKey: w.RemoteQKey}, abi.StatusSuccess
}
