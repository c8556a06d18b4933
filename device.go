package vrdma

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/vrdma/vrdma/ibv"
	"github.com/vrdma/vrdma/internal/abi"
	"github.com/vrdma/vrdma/internal/proto"
)

// DeviceInfo describes an adapter as ibv_get_device_list would list it.
type DeviceInfo struct {
	Name     string
	Index    int
	GUID     uint64
	MAC      net.HardwareAddr
	GIDs     []GID
	Async    bool
	Instance string
	Host     string
}

func deviceInfo(a proto.AdapterInfo, instance, host string) DeviceInfo {
	d := DeviceInfo{Name: a.Name, Index: a.Index, GUID: a.GUID, Async: a.Async, Instance: instance, Host: host}
	d.MAC, _ = net.ParseMAC(a.MAC)
	for _, g := range a.GIDs {
		var x GID
		copy(x[:], g)
		d.GIDs = append(d.GIDs, x)
	}
	return d
}

// Devices lists the adapters of the instance o names.
func Devices(o Options) ([]DeviceInfo, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	c, err := dial(o, nil)
	if err != nil {
		return nil, err
	}
	defer c.close()
	var resp proto.HelloResp
	if _, err := c.call(proto.OpHello, proto.HelloReq{Instance: o.Instance, Client: o.Client}, &resp); err != nil {
		return nil, err
	}
	out := make([]DeviceInfo, 0, len(resp.Adapters))
	for _, a := range resp.Adapters {
		out = append(out, deviceInfo(a, resp.Instance, resp.Host))
	}
	return out, nil
}

// DeviceAttr is what ibv_query_device reports, where it applies. The
// maxima of objects (MaxQP, MaxCQ, MaxMR, MaxPD, MaxSRQ, MaxAH) and
// MaxMRSize are the limits the daemon enforces for this process's user and
// instance: creating one more fails with ErrLimit.
type DeviceAttr struct {
	FWVer           string
	NodeGUID        uint64
	SysImageGUID    uint64
	MaxMRSize       uint64
	PageSizeCap     uint64
	VendorID        uint32
	VendorPartID    uint32
	HWVer           uint32
	MaxQP           int
	MaxQPWR         int
	MaxSGE          int
	MaxCQ           int
	MaxCQE          int
	MaxMR           int
	MaxPD           int
	MaxQPRdAtom     int
	MaxQPInitRdAtom int
	AtomicCap       string
	MaxSRQ          int
	MaxSRQWR        int
	MaxSRQSGE       int
	MaxAH           int
	MaxInline       int
	MaxPKeys        int
	PhysPortCnt     int
	// MaxRingBytes is what this process's user and instance may have the
	// daemon allocate for queues in all (their rings and the daemon's
	// state of them, the daemon's ring limit): a QP, CQ or SRQ past it
	// fails with ErrLimit. A vrdma extension; 0 from an older daemon.
	MaxRingBytes uint64
}

func deviceAttr(a *proto.DeviceAttr) DeviceAttr {
	if a == nil {
		return DeviceAttr{}
	}
	return DeviceAttr{
		FWVer: a.FWVer, NodeGUID: a.NodeGUID, SysImageGUID: a.SysImageGUID, MaxMRSize: a.MaxMRSize,
		PageSizeCap: a.PageSizeCap, VendorID: a.VendorID, VendorPartID: a.VendorPartID, HWVer: a.HWVer,
		MaxQP: a.MaxQP, MaxQPWR: a.MaxQPWR, MaxSGE: a.MaxSGE, MaxCQ: a.MaxCQ, MaxCQE: a.MaxCQE,
		MaxMR: a.MaxMR, MaxPD: a.MaxPD, MaxQPRdAtom: a.MaxQPRdAtom, MaxQPInitRdAtom: a.MaxQPInitRdAtom,
		AtomicCap: a.AtomicCap, MaxSRQ: a.MaxSRQ, MaxSRQWR: a.MaxSRQWR, MaxSRQSGE: a.MaxSRQSGE,
		MaxAH: a.MaxAH, MaxInline: a.MaxInline, MaxPKeys: a.MaxPKeys, PhysPortCnt: a.PhysPortCnt,
		MaxRingBytes: a.MaxRingBytes,
	}
}

// PortAttr is what ibv_query_port reports, where it applies, with the
// port's traffic counters.
type PortAttr struct {
	State      string
	PhysState  string
	MaxMTU     ibv.MTU
	ActiveMTU  ibv.MTU
	GIDTblLen  int
	PKeyTblLen int
	GIDs       []GID
	// LID is the port's LID, unique on the switch (a vrdma extension,
	// as on an InfiniBand port: the switch's subnet manager assigns it, or
	// the daemon on a host with no switch); 0 until it is assigned. An
	// address vector may name a port by it alone (AHAttr.DLID).
	LID       uint16
	LinkLayer string
	Rate      string
	Counters  Counters
}

// Counters are a port's traffic counters (a message on the memcpy path
// counts as one packet) and how many messages each path carried.
type Counters struct {
	TxBytes    uint64
	TxPackets  uint64
	RxBytes    uint64
	RxPackets  uint64
	TxErrors   uint64
	RxErrors   uint64
	RxDrops    uint64
	RNRNaks    uint64
	PathMemcpy uint64
	PathRDMA   uint64
	PathTCP    uint64
	// Go-back-Ns of the port's RC requesters: after the retransmit timer
	// fired (local_ack_timeout_err), after a sequence-error NAK or a gap in
	// READ responses (packet_seq_err), after an ACK past a READ or atomic
	// whose responses were lost (implied_nak_seq_err); and the packets they
	// sent again.
	AckTimeouts   uint64
	SeqNAKs       uint64
	ImpliedNAKs   uint64
	ResentPackets uint64
	// Payload bytes the daemon copied itself (memcpy path, software
	// RoCEv2 and TCP packets built and received) and the messages sent that
	// way; send requests posted to a verbs uplink's device and their bytes,
	// which the device moves with no copy by the daemon.
	CopyBytes  uint64
	CopyMsgs   uint64
	PathVerbs  uint64
	VerbsBytes uint64
}

func counters(c proto.Counters) Counters {
	return Counters{TxBytes: c.TxBytes, TxPackets: c.TxPackets, RxBytes: c.RxBytes, RxPackets: c.RxPackets,
		TxErrors: c.TxErrors, RxErrors: c.RxErrors, RxDrops: c.RxDrops, RNRNaks: c.RNRNaks,
		PathMemcpy: c.PathMemcpy, PathRDMA: c.PathRDMA, PathTCP: c.PathTCP,
		AckTimeouts: c.AckTimeouts, SeqNAKs: c.SeqNAKs, ImpliedNAKs: c.ImpliedNAKs, ResentPackets: c.ResentPackets,
		CopyBytes: c.CopyBytes, CopyMsgs: c.CopyMsgs, PathVerbs: c.PathVerbs, VerbsBytes: c.VerbsBytes}
}

// AsyncEvent is an asynchronous event (struct ibv_async_event).
type AsyncEvent struct {
	Type   ibv.EventType
	QP     *QP // for QP events
	CQ     *CQ // for CQ events
	SRQ    *SRQ
	Reason string
}

// Device is an opened adapter (an ibv_context).
type Device struct {
	c    *conn
	info DeviceInfo
	attr DeviceAttr

	mu     sync.Mutex
	qps    map[uint32]*QP
	cqs    map[uint32]*CQ
	srqs   map[uint32]*SRQ
	mrs    map[uint32]*MR // by lkey
	events chan AsyncEvent
	closed bool

	// lost is set once the daemon is gone (or reported DEVICE_FATAL): the
	// data path's verbs fail with ErrDeviceFatal instead of waiting for a
	// daemon that will never answer (lost.go).
	lost atomic.Bool

	cm cmState // connection manager (cm.go)
}

// Open opens the adapter called name ("vrdma0" ... "vrdma9") of the
// instance the options (or VRDMA_INSTANCE) name.
func Open(name string, opts ...Options) (*Device, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Device{qps: map[uint32]*QP{}, cqs: map[uint32]*CQ{}, srqs: map[uint32]*SRQ{}, events: make(chan AsyncEvent, 64)}
	c, err := dialEvents(o, d.dispatch, d.cmDispatch)
	if err != nil {
		return nil, err
	}
	var resp proto.HelloResp
	if _, err := c.call(proto.OpHello, proto.HelloReq{Instance: o.Instance, Device: name, Client: o.Client}, &resp); err != nil {
		c.close()
		return nil, err
	}
	d.c = c
	d.info = deviceInfo(*resp.Device, resp.Instance, resp.Host)
	d.attr = deviceAttr(resp.Attr)
	go d.watch()
	return d, nil
}

// watch turns the loss of the daemon into a DEVICE_FATAL event and a lost
// device, whose QPs are in ERR, as a device reset would leave them.
func (d *Device) watch() {
	<-d.c.dead
	d.markLost()
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	d.cmLost()
	if !closed {
		d.push(AsyncEvent{Type: ibv.EventDeviceFatal, Reason: "the vrdma daemon went away"})
	}
}

func (d *Device) dispatch(ev proto.Event) {
	e := AsyncEvent{Type: ibv.EventType(ev.Type), Reason: ev.Reason}
	d.mu.Lock()
	switch e.Type {
	case abi.EventQPFatal, abi.EventQPReqErr, abi.EventQPAccessErr, abi.EventCommEst, abi.EventSQDrained, abi.EventQPLastWQE:
		e.QP = d.qps[ev.Handle] // the daemon published the QP's new state before it sent this
	case abi.EventCQErr:
		e.CQ = d.cqs[ev.Handle]
	case abi.EventSRQErr, abi.EventSRQLimit:
		e.SRQ = d.srqs[ev.Handle]
	}
	d.mu.Unlock()
	if e.Type == ibv.EventDeviceFatal {
		d.markLost()
	}
	d.push(e)
}

func (d *Device) push(e AsyncEvent) {
	select {
	case d.events <- e:
	default: // a program that never reads its events loses the oldest
		select {
		case <-d.events:
		default:
		}
		select {
		case d.events <- e:
		default:
		}
	}
}

// Events returns the channel of asynchronous events (ibv_get_async_event).
func (d *Device) Events() <-chan AsyncEvent { return d.events }

// Info returns the device's identity: name, GUID, MAC, GIDs.
func (d *Device) Info() DeviceInfo { return d.info }

// DaemonPID returns the process id of the daemon serving the device.
func (d *Device) DaemonPID() int { return d.c.peerPID }

// Name returns the device name.
func (d *Device) Name() string { return d.info.Name }

// Query returns the device attributes (ibv_query_device).
func (d *Device) Query() (DeviceAttr, error) {
	var a proto.DeviceAttr
	if _, err := d.c.call(proto.OpQueryDevice, nil, &a); err != nil {
		return DeviceAttr{}, err
	}
	return deviceAttr(&a), nil
}

// QueryPort returns the attributes and counters of port (always 1).
func (d *Device) QueryPort(port int) (PortAttr, error) {
	var p proto.PortAttr
	if _, err := d.c.call(proto.OpQueryPort, proto.QueryPortReq{Port: port}, &p); err != nil {
		return PortAttr{}, err
	}
	out := PortAttr{State: p.State, PhysState: p.PhysState, MaxMTU: ibv.MTU(p.MaxMTU), ActiveMTU: ibv.MTU(p.ActiveMTU),
		GIDTblLen: p.GIDTblLen, PKeyTblLen: p.PKeyTblLen, LID: p.LID, LinkLayer: p.LinkLayer, Rate: p.Rate, Counters: counters(p.Counters)}
	for _, g := range p.GIDs {
		var x GID
		copy(x[:], g)
		out.GIDs = append(out.GIDs, x)
	}
	return out, nil
}

// GID returns entry index of the port's GID table.
func (d *Device) GID(index int) (GID, error) {
	// The table follows the host's links and addresses: ask the daemon,
	// as ibv_query_gid asks the kernel.
	p, err := d.QueryPort(1)
	if err != nil {
		return GID{}, err
	}
	if index < 0 || index >= len(p.GIDs) {
		return GID{}, errorf("query_gid", ErrInvalidArgument, "GID index %d is outside the table of %d entries", index, len(p.GIDs))
	}
	return p.GIDs[index], nil
}

// Close closes the device. Objects not destroyed are released by the daemon;
// QPs connected to them go to the error state.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	return d.c.close()
}
