package proto

import "github.com/vrdma/vrdma/internal/qpstate"

// The bodies of the commands. Handles name per-connection objects; QPNs and
// keys are the adapter's.

type HelloReq struct {
	Instance string `json:"instance"` // "" = the default instance
	Device   string `json:"device"`   // adapter to bind this connection to, "" = none (admin/list)
	Client   string `json:"client"`   // a name for logs and tools
}

type AdapterInfo struct {
	Name      string   `json:"name"`
	Index     int      `json:"index"`
	GUID      uint64   `json:"guid"`
	MAC       string   `json:"mac"`
	GIDs      [][]byte `json:"gids"`
	Async     bool     `json:"async"`
	State     string   `json:"state"`
	ActiveMTU uint8    `json:"active_mtu"`
}

type HelloResp struct {
	Version  int           `json:"version"`
	Instance string        `json:"instance"`
	Host     string        `json:"host"`
	Adapters []AdapterInfo `json:"adapters"`
	Device   *AdapterInfo  `json:"device,omitempty"`
	Attr     *DeviceAttr   `json:"attr,omitempty"`
}

// DeviceAttr is the part of ibv_device_attr that applies.
type DeviceAttr struct {
	FWVer           string `json:"fw_ver"`
	NodeGUID        uint64 `json:"node_guid"`
	SysImageGUID    uint64 `json:"sys_image_guid"`
	MaxMRSize       uint64 `json:"max_mr_size"`
	PageSizeCap     uint64 `json:"page_size_cap"`
	VendorID        uint32 `json:"vendor_id"`
	VendorPartID    uint32 `json:"vendor_part_id"`
	HWVer           uint32 `json:"hw_ver"`
	MaxQP           int    `json:"max_qp"`
	MaxQPWR         int    `json:"max_qp_wr"`
	MaxSGE          int    `json:"max_sge"`
	MaxCQ           int    `json:"max_cq"`
	MaxCQE          int    `json:"max_cqe"`
	MaxMR           int    `json:"max_mr"`
	MaxMW           int    `json:"max_mw"`
	MaxPD           int    `json:"max_pd"`
	MaxQPRdAtom     int    `json:"max_qp_rd_atom"`
	MaxQPInitRdAtom int    `json:"max_qp_init_rd_atom"`
	AtomicCap       string `json:"atomic_cap"`
	MaxSRQ          int    `json:"max_srq"`
	MaxSRQWR        int    `json:"max_srq_wr"`
	MaxSRQSGE       int    `json:"max_srq_sge"`
	MaxAH           int    `json:"max_ah"`
	MaxInline       int    `json:"max_inline_data"`
	MaxPKeys        int    `json:"max_pkeys"`
	PhysPortCnt     int    `json:"phys_port_cnt"`
	// MaxRingBytes is what the caller's queues may take in all (the
	// daemon's ring limit): a vrdma extension.
	MaxRingBytes uint64 `json:"max_ring_bytes,omitempty"`
	// Multicast: groups per tenant, QPs per group, attachments in all.
	MaxMcastGrp           int `json:"max_mcast_grp"`
	MaxMcastQPAttach      int `json:"max_mcast_qp_attach"`
	MaxTotalMcastQPAttach int `json:"max_total_mcast_qp_attach"`
}

// PortAttr is the part of ibv_port_attr that applies, with counters.
type PortAttr struct {
	State      string   `json:"state"`      // "ACTIVE", "DOWN"
	PhysState  string   `json:"phys_state"` // "LINK_UP"
	MaxMTU     uint8    `json:"max_mtu"`
	ActiveMTU  uint8    `json:"active_mtu"`
	GIDTblLen  int      `json:"gid_tbl_len"`
	PKeyTblLen int      `json:"pkey_tbl_len"`
	GIDs       [][]byte `json:"gids"`
	// LID is the port's LID (a vrdma extension: the switch's subnet
	// manager assigns it; a daemon on no switch, the daemon): 0 until
	// it is assigned.
	LID       uint16   `json:"lid"`
	LinkLayer string   `json:"link_layer"`
	Rate      string   `json:"rate"`
	Counters  Counters `json:"counters"`
}

// Counters are an adapter port's traffic counters. On the memcpy path a
// message counts as one packet.
type Counters struct {
	TxBytes    uint64 `json:"tx_bytes"`
	TxPackets  uint64 `json:"tx_packets"`
	RxBytes    uint64 `json:"rx_bytes"`
	RxPackets  uint64 `json:"rx_packets"`
	TxErrors   uint64 `json:"tx_errors"`
	RxErrors   uint64 `json:"rx_errors"`
	RxDrops    uint64 `json:"rx_drops"`
	RNRNaks    uint64 `json:"rnr_naks"`
	PathMemcpy uint64 `json:"path_memcpy"`
	PathRDMA   uint64 `json:"path_rdma"`
	PathTCP    uint64 `json:"path_tcp"`
	// The requesters' go-back-Ns by cause, and the packets sent again.
	AckTimeouts   uint64 `json:"local_ack_timeout_err"`
	SeqNAKs       uint64 `json:"packet_seq_err"`
	ImpliedNAKs   uint64 `json:"implied_nak_seq_err"`
	ResentPackets uint64 `json:"resent_packets"`
	// Payload bytes the daemon copied itself and the messages sent that
	// way; send requests posted to a verbs uplink's device and their bytes
	// (moved by the device, not copied).
	CopyBytes  uint64 `json:"copy_bytes"`
	CopyMsgs   uint64 `json:"copy_msgs"`
	PathVerbs  uint64 `json:"path_verbs"`
	VerbsBytes uint64 `json:"verbs_bytes"`
}

type QueryPortReq struct {
	Port int `json:"port"`
}

// McastReq attaches a UD QP to, or detaches it from, the multicast group
// GID (ibv_attach_mcast, ibv_detach_mcast). LID is what the caller gave;
// on a RoCE port it means nothing.
type McastReq struct {
	QP  uint32   `json:"qp"`
	GID [16]byte `json:"gid"`
	LID uint16   `json:"lid"`
}

type HandleReq struct {
	Handle uint32 `json:"handle"`
}

type HandleResp struct {
	Handle uint32 `json:"handle"`
}

// RegMRReq registers bytes [Offset, Offset+Length) of the sealed memfd that
// comes with the message, which must hold at least Offset+Length bytes, as a
// region at the client's virtual address Addr. A library that registers
// application memory backs the pages that hold it with a memfd mapped at the
// same address: Offset is then Addr's offset within its page.
//
// With Segments, the pages that hold the region come from several memfds,
// one descriptor per segment in the same order: the daemon maps the
// segments one after the other, and the region is bytes [Offset,
// Offset+Length) of that mapping, Offset inside its first page and the
// region's last byte inside its last (docs/design/guest-memory.md).
type RegMRReq struct {
	PD       uint32      `json:"pd"`
	Addr     uint64      `json:"addr"`             // the client's virtual address of the region
	Length   uint64      `json:"length"`           // bytes
	Offset   uint64      `json:"offset,omitempty"` // where the region starts in the memfd (or the segments)
	Access   uint32      `json:"access"`
	Segments []MRSegment `json:"segments,omitempty"`
}

// MRSegment is one piece of a region registered from several memfds
// (RegMRReq.Segments): the whole pages [Offset, Offset+Length) of its
// memfd. Both are multiples of the page size, Length positive.
type MRSegment struct {
	Offset uint64 `json:"offset"`
	Length uint64 `json:"length"`
}

// MaxMRSegments bounds RegMRReq.Segments: one descriptor each.
const MaxMRSegments = MaxFDs

// ReregMRReq re-registers region Handle (ibv_rereg_mr): the region
// becomes what RegMRReq describes (with its descriptors, as reg_mr's),
// under the same keys; the reply is a RegMRResp.
type ReregMRReq struct {
	Handle uint32 `json:"handle"`
	RegMRReq
}

type RegMRResp struct {
	Handle uint32 `json:"handle"`
	LKey   uint32 `json:"lkey"`
	RKey   uint32 `json:"rkey"`
}

// ImportDeviceReq comes with one descriptor: a connected unixpacket
// socket (a socketpair's end) that the daemon serves from then on as
// another connection to the session of the connection the request came on:
// the same device, the same objects by the same handles (ibv_import_device,
// docs/design/import.md). The reply, a HelloResp, goes on that socket,
// none on this one; it carries the request id ID, the importer's first on
// that socket.
type ImportDeviceReq struct {
	ID uint32 `json:"id"`
}

// ImportObjectReq names an object of the session by its handle: Kind is
// "pd" or "mr" (ibv_import_pd, ibv_import_mr); for "mr", PD is the handle
// of the protection domain the region must belong to.
type ImportObjectReq struct {
	Kind   string `json:"kind"`
	Handle uint32 `json:"handle"`
	PD     uint32 `json:"pd,omitempty"`
}

// ImportObjectResp describes an imported object: for a region its keys,
// length and access (its address stays its owner's: ibv_import_mr leaves
// addr NULL, as rdma-core's).
type ImportObjectResp struct {
	Handle uint32 `json:"handle"`
	LKey   uint32 `json:"lkey,omitempty"`
	RKey   uint32 `json:"rkey,omitempty"`
	Length uint64 `json:"length,omitempty"`
	Access uint32 `json:"access,omitempty"`
}

// AllocMWReq allocates a memory window of type Type (1 or 2) in the
// protection domain PD; the reply is an AllocMWResp. Binding it is a work
// request (abi.OpBindMW).
type AllocMWReq struct {
	PD   uint32 `json:"pd"`
	Type uint8  `json:"type"`
}

// AllocMWResp names a new memory window and its first rkey.
type AllocMWResp struct {
	Handle uint32 `json:"handle"`
	RKey   uint32 `json:"rkey"`
}

type CreateCQReq struct {
	CQE int `json:"cqe"`
	// Timestamps asks for entries of abi.CQETSSize bytes that say when
	// each completion was written (ibv_create_cq_ex's completion timestamp
	// flags); the reply's Stride says the daemon made them.
	Timestamps bool `json:"timestamps,omitempty"`
}

// CreateCQResp comes with three descriptors: the ring's memfd, then the
// read and the write end of its notification doorbell (a pipe).
type CreateCQResp struct {
	Handle  uint32 `json:"handle"`
	CQE     int    `json:"cqe"`
	Size    int    `json:"size"`
	Entries int    `json:"entries"`
	Stride  int    `json:"stride"` // an entry's bytes: abi.CQESize, or abi.CQETSSize when timestamped
}

// ResizeCQReq asks for the CQ's ring to hold at least CQE completions
// (1..MaxCQE, and no fewer than it holds now).
type ResizeCQReq struct {
	Handle uint32 `json:"handle"`
	CQE    int    `json:"cqe"`
}

// ResizeCQResp comes with one descriptor: the new ring's memfd, which
// replaces the old one (the doorbell stays). The ring keeps the indices:
// the completions not yet polled are at the same producer and consumer
// indices in the new ring (docs/design/cq-resize.md).
type ResizeCQResp struct {
	CQE     int `json:"cqe"`
	Size    int `json:"size"`
	Entries int `json:"entries"`
}

type QPCaps struct {
	MaxSendWR     int `json:"max_send_wr"`
	MaxRecvWR     int `json:"max_recv_wr"`
	MaxSendSGE    int `json:"max_send_sge"`
	MaxRecvSGE    int `json:"max_recv_sge"`
	MaxInlineData int `json:"max_inline_data"`
}

type CreateQPReq struct {
	PD     uint32 `json:"pd"`
	Type   uint8  `json:"type"`
	SendCQ uint32 `json:"send_cq"`
	RecvCQ uint32 `json:"recv_cq"`
	SRQ    uint32 `json:"srq"`            // 0 = none
	XRCD   uint32 `json:"xrcd,omitempty"` // an XRC_RECV QP's domain (it has no PD, CQs or queues)
	SigAll bool   `json:"sq_sig_all"`
	Caps   QPCaps `json:"caps"`
}

// RingInfo locates a ring in a region passed with a reply.
type RingInfo struct {
	Offset  int `json:"offset"`
	Entries int `json:"entries"`
	Stride  int `json:"stride"`
}

// CreateQPResp comes with two descriptors: the rings' memfd, the write end
// of the QP's doorbell (a pipe).
type CreateQPResp struct {
	Handle uint32   `json:"handle"`
	QPN    uint32   `json:"qpn"`
	Caps   QPCaps   `json:"caps"`
	Size   int      `json:"size"`
	SQ     RingInfo `json:"sq"`
	RQ     RingInfo `json:"rq"` // Entries 0 when the QP uses an SRQ
	// NotifyGen: the send ring's notify word is a new non-zero value at
	// each arming, so a client rings once per value (docs/design/rings.md).
	NotifyGen bool `json:"notify_gen,omitempty"`
}

type ModifyQPReq struct {
	Handle uint32       `json:"handle"`
	Mask   uint32       `json:"mask"`
	Attr   qpstate.Attr `json:"attr"`
}

type ModifyQPResp struct {
	State  uint8  `json:"state"`
	Direct bool   `json:"direct,omitempty"` // one-sided operations may run in the initiator (MapMR)
	Path   string `json:"path,omitempty"`   // "memcpy", once the destination is known
	Reason string `json:"reason,omitempty"` // why that path ("same host")
}

type QueryQPResp struct {
	Attr qpstate.Attr `json:"attr"`
	Caps QPCaps       `json:"caps"`
	Path string       `json:"path,omitempty"`
}

type CreateSRQReq struct {
	PD     uint32 `json:"pd"`
	MaxWR  int    `json:"max_wr"`
	MaxSGE int    `json:"max_sge"`
	// An XRC SRQ names its XRC domain and the CQ its receives complete on.
	XRCD uint32 `json:"xrcd,omitempty"`
	CQ   uint32 `json:"cq,omitempty"`
}

// CreateSRQResp comes with one descriptor, the ring memfd, and a second,
// the SRQ's doorbell, for an SRQ on a device (a bound adapter's): the client
// rings it after posting when the ring's notify word is set.
type CreateSRQResp struct {
	Handle uint32   `json:"handle"`
	MaxWR  int      `json:"max_wr"`
	MaxSGE int      `json:"max_sge"`
	Size   int      `json:"size"`
	Ring   RingInfo `json:"ring"`
	SRQN   uint32   `json:"srqn,omitempty"` // an XRC SRQ's number (ibv_get_srq_num)
}

// SRQ attribute mask bits of ModifySRQReq (IBV_SRQ_MAX_WR, IBV_SRQ_LIMIT).
const (
	SRQMaxWR = 1 << 0
	SRQLimit = 1 << 1
)

// ModifySRQReq resizes an SRQ to hold at least MaxWR requests (mask
// SRQMaxWR) and arms its limit event at Limit (SRQLimit; 0 disarms).
type ModifySRQReq struct {
	Handle uint32 `json:"handle"`
	Mask   int    `json:"mask"`
	MaxWR  int    `json:"max_wr"`
	Limit  int    `json:"srq_limit"`
}

// ModifySRQResp is the SRQ's size and armed limit after the change. A
// resize's reply comes with one descriptor, the new ring's memfd of Size
// bytes, which replaces the old one; the posted requests keep their
// indices in it.
type ModifySRQResp struct {
	MaxWR int      `json:"max_wr"`
	Limit int      `json:"srq_limit"`
	Size  int      `json:"size,omitempty"`
	Ring  RingInfo `json:"ring"`
}

// OpenQPReq opens the XRC_RECV QP numbered QPN of the XRC domain the
// handle XRCD holds (ibv_open_qp); the reply is a CreateQPResp.
type OpenQPReq struct {
	XRCD uint32 `json:"xrcd"`
	QPN  uint32 `json:"qpn"`
}

// OpenXRCDReq opens an XRC domain. With FD (the request carries one
// descriptor, of any file) the domain is the one of that file's inode for
// the caller's uid on its device, created if OFlags has O_CREAT, refused
// if it exists and OFlags has O_EXCL, as the kernel's; without, a new
// private domain.
type OpenXRCDReq struct {
	FD     bool `json:"fd"`
	OFlags int  `json:"oflags"`
}

type CreateAHReq struct {
	PD uint32                `json:"pd"`
	AV qpstate.AddressVector `json:"av"`
}

type InstanceSpec struct {
	Name     string `json:"name"`
	Adapters int    `json:"adapters"`
	Async    bool   `json:"async"`
	// TrustGroup: instances with the same non-empty group trust each other,
	// as an instance trusts itself. Between trusting adapters the daemon
	// steps out of the path of one-sided operations.
	TrustGroup string `json:"trust_group,omitempty"`
	// Uplink names a verbs link (`vrdma link add NAME type verbs`) the
	// adapters are bound to: their RC QPs and regions are the device's
	// (docs/design/verbs-uplink-binding.md).
	Uplink string `json:"uplink,omitempty"`
	// PortGroup is the switch's port group the adapters attach to ("" =
	// the default one).
	PortGroup string `json:"port_group,omitempty"`
	// NativeEndpoints: the adapters' QPs are reachable by any RoCEv2 peer
	// (.vmx vrdma0.nativeEndpointSupport).
	NativeEndpoints bool `json:"native_endpoints,omitempty"`
	// Pin: the instance's registered memory must be lockable (.vmx
	// sched.mem.pin); creation fails when the daemon cannot lock memory.
	Pin bool `json:"pin,omitempty"`
	// LIDRouting: an address vector of the adapters' QPs and address
	// handles may name its destination by LID alone, without a GRH
	// (docs/design/lid-addressing.md); without it, as on rdma_rxe, a GRH
	// is required.
	LIDRouting bool `json:"lid_routing,omitempty"`
	// Owner is the tenant the instance belongs to; nil: the creator (the
	// uid and gid of the session that asks). Naming another owner is for
	// root and the daemon's admin group.
	Owner *Owner `json:"owner,omitempty"`
	// Temporary: the instance ends when the session that created it has
	// ended and no process is attached any more; it is never persisted.
	Temporary bool `json:"temporary,omitempty"`
}

// Owner is a tenant: the uid and gid that own an instance.
type Owner struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// MapMRReq asks, for a QP whose path is direct, for the peer's region with
// this rkey. The reply carries the region's memfd.
type MapMRReq struct {
	QP   uint32 `json:"qp"`
	RKey uint32 `json:"rkey"`
}

// MapMRResp describes the region whose memfd comes with it: bytes [Offset,
// Offset+Length) of the memfd, at the owner's address Addr.
type MapMRResp struct {
	Addr       uint64 `json:"addr"`
	Length     uint64 `json:"length"`
	Offset     uint64 `json:"offset,omitempty"` // where the region starts in the memfd
	Access     uint32 `json:"access"`           // the region's access flags
	PeerAccess uint32 `json:"peer_access"`      // the responder QP's access flags
}

type InstanceInfo struct {
	Name       string        `json:"name"`
	Host       string        `json:"host,omitempty"`
	TrustGroup string        `json:"trust_group,omitempty"`
	PortGroup  string        `json:"port_group,omitempty"`
	Native     bool          `json:"native_endpoints,omitempty"`
	Async      bool          `json:"async,omitempty"`
	Pin        bool          `json:"pin,omitempty"`
	Remote     bool          `json:"remote,omitempty"` // on another host of the switch: from its record
	Owner      *Owner        `json:"owner,omitempty"`  // nil for another host's (its record carries none)
	Temporary  bool          `json:"temporary,omitempty"`
	Adapters   []AdapterInfo `json:"adapters"`
	Sessions   int           `json:"sessions"`
}

// ListInstancesReq: All asks for the instances of every host of the
// switch, not only this one's (an empty body means this host's).
type ListInstancesReq struct {
	All bool `json:"all,omitempty"`
}

type ListInstancesResp struct {
	Instances []InstanceInfo `json:"instances"`
}

// StatsResp counts the daemon's live objects, for tools and leak tests.
type StatsResp struct {
	Sessions int `json:"sessions"`
	PDs      int `json:"pds"`
	MRs      int `json:"mrs"`
	CQs      int `json:"cqs"`
	QPs      int `json:"qps"`
	SRQs     int `json:"srqs"`
	AHs      int `json:"ahs"`
	Workers  int `json:"workers"`
}

// Event is an asynchronous event. Handle names the QP, CQ or SRQ of this
// connection it concerns (0 for port and device events).
type Event struct {
	Type   uint8  `json:"type"`
	Handle uint32 `json:"handle"`
	QPN    uint32 `json:"qpn,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// LinkSpec is a link on a host interface, as `vrdma link add NAME type rxe
// netdev IFACE [dscp N]` gives it, or on a device of the host's rdma-core,
// as `vrdma link add NAME type verbs dev IBDEV [port N]` gives it;
// link_delete and list_links use Name only ("" lists every link).
type LinkSpec struct {
	Name    string `json:"name"`
	Type    string `json:"type"` // "rxe": RoCEv2 over UDP, like the kernel's Soft-RoCE; "verbs": a device of the host's rdma-core
	Netdev  string `json:"netdev"`
	DSCP    uint8  `json:"dscp"`
	Dev     string `json:"dev,omitempty"`      // verbs: the rdma-core device (mlx5_0, rxe0)
	DevPort uint8  `json:"dev_port,omitempty"` // verbs: its port, 1 if 0
}

// VerbsLinkInfo is what a verbs link's device reports: ibv_query_device,
// ibv_query_port and the GID table.
type VerbsLinkInfo struct {
	Dev       string     `json:"dev"`
	Port      uint8      `json:"port"`
	Transport string     `json:"transport"`  // "InfiniBand" (IB and RoCE), "iWARP"
	LinkLayer string     `json:"link_layer"` // "Ethernet", "InfiniBand"
	PortState string     `json:"port_state"` // "PORT_ACTIVE", ...
	FWVer     string     `json:"fw_ver,omitempty"`
	NodeGUID  uint64     `json:"node_guid"`
	LID       uint16     `json:"lid,omitempty"`
	MaxMTU    uint8      `json:"max_mtu"` // enum ibv_mtu
	AtomicCap uint32     `json:"atomic_cap"`
	GIDs      []VerbsGID `json:"gids"`
}

// VerbsGID is one entry of a verbs link's GID table.
type VerbsGID struct {
	Index  uint32 `json:"index"`
	Type   string `json:"type"` // "IB", "RoCE v1", "RoCE v2"
	GID    []byte `json:"gid"`
	Netdev string `json:"netdev,omitempty"`
}

// LinkInfo is a link as `vrdma link show` prints it.
type LinkInfo struct {
	LinkSpec
	State     string       `json:"state"`      // "ACTIVE", "DOWN"
	PhysState string       `json:"phys_state"` // "LINK_UP", "DISABLED"
	Problem   string       `json:"problem,omitempty"`
	GIDs      [][]byte     `json:"gids"`
	ActiveMTU uint8        `json:"active_mtu"`
	Port      uint16       `json:"port"` // UDP port (4791)
	Counters  LinkCounters `json:"counters"`
	// Verbs is the device of a verbs link, nil for the others or when it
	// could not be opened.
	Verbs *VerbsLinkInfo `json:"verbs,omitempty"`
}

// LinkCounters are a link's traffic counters.
type LinkCounters struct {
	RxPackets uint64 `json:"rx_packets"`
	RxBytes   uint64 `json:"rx_bytes"`
	TxPackets uint64 `json:"tx_packets"`
	TxBytes   uint64 `json:"tx_bytes"`
	RxNotOurs uint64 `json:"rx_not_ours"` // to the port, for another address of the host
	RxDropped uint64 `json:"rx_dropped"`
	RxErrors  uint64 `json:"rx_errors"`
	TxErrors  uint64 `json:"tx_errors"`
	// GSO buffers sent, and received whole and cut into their packets
	// (counted in the packets too): the bulk path, docs/design/bulk-path.md.
	TxGSO uint64 `json:"tx_gso"`
	RxGSO uint64 `json:"rx_gso"`
	// What the engine dropped of what the link delivered.
	RxMalformed uint64 `json:"rx_malformed"`   // not a RoCEv2 packet it can decode
	RxICRC      uint64 `json:"rx_icrc_errors"` // the invariant CRC did not match
	RxUnknownQP uint64 `json:"rx_unknown_qp"`  // no such QP, or one of another type, state or connection
	RxBadPKey   uint64 `json:"rx_bad_pkey"`
}

type ListLinksResp struct {
	Links []LinkInfo `json:"links"`
}
