package proto

import "fmt"

// Op is a command.
type Op uint16

const (
	OpHello Op = iota + 1
	OpQueryDevice
	OpQueryPort
	OpAllocPD
	OpDeallocPD
	OpRegMR
	OpDeregMR
	OpCreateCQ
	OpDestroyCQ
	OpCreateQP
	OpModifyQP
	OpQueryQP
	OpDestroyQP
	OpCreateSRQ
	OpDestroySRQ
	OpCreateAH
	OpDestroyAH
	OpCreateInstance
	OpDeleteInstance
	OpListInstances
	OpStats
	OpEvent // daemon to client: an asynchronous event
	OpMapMR
	OpLinkAdd
	OpLinkDelete
	OpListLinks
	OpSwitchShow   // the switch, its subnet manager and counts
	OpPortGroupAdd // create or replace a port group
	OpPortGroupDelete
	OpPortGroupList
	OpHostList // the live hosts of the switch
	OpPath     // the path between two adapters, with the reason
	OpCMListen // connection manager (cm.go)
	OpCMCancelListen
	OpCMConnect
	OpCMAccept
	OpCMReject
	OpCMDisconnect
	OpCMEvent   // daemon to client: a connection manager event
	OpCMResolve // the source address and path to an address (rdma_resolve_addr/route)
	OpResizeCQ  // a CQ's ring replaced by one of another size, its completions kept
	OpReregMR   // a region's memory, PD or access replaced under the same keys
	OpAllocMW   // a memory window of a PD (AllocMWReq)
	OpDeallocMW
	OpImportDevice // another connection to this session (ibv_import_device): ImportDeviceReq with a socket
	OpImportObject // an object of this session by its handle (ibv_import_pd/mr): ImportObjectReq
	OpAttachMcast  // a UD QP attached to a multicast group (McastReq)
	OpDetachMcast
	OpOpenXRCD  // an XRC domain, shared by the file descriptor that comes with the request (OpenXRCDReq)
	OpCloseXRCD // a handle of an XRC domain
	OpOpenQP    // a handle of another process's XRC_RECV QP of the same XRC domain (OpenQPReq)
	OpMcastList // the switch's record of the multicast groups the caller may see (switchview.McastList)
	OpModifySRQ // an SRQ's limit armed or its ring resized (ModifySRQReq)
	OpQuerySRQ  // an SRQ's size and armed limit (HandleReq; the reply is a ModifySRQResp)
	opMax
)

var opNames = [...]string{"", "hello", "query_device", "query_port", "alloc_pd", "dealloc_pd", "reg_mr", "dereg_mr",
	"create_cq", "destroy_cq", "create_qp", "modify_qp", "query_qp", "destroy_qp", "create_srq",
	"destroy_srq", "create_ah", "destroy_ah", "create_instance", "delete_instance", "list_instances",
	"stats", "event", "map_mr", "link_add", "link_delete", "list_links",
	"switch_show", "portgroup_add", "portgroup_delete", "portgroup_list", "host_list", "path",
	"cm_listen", "cm_cancel_listen", "cm_connect", "cm_accept", "cm_reject", "cm_disconnect", "cm_event", "cm_resolve",
	"resize_cq", "rereg_mr", "alloc_mw", "dealloc_mw", "import_device", "import_object", "attach_mcast", "detach_mcast", "open_xrcd", "close_xrcd", "open_qp", "mcast_list", "modify_srq", "query_srq"}

func (o Op) String() string {
	if o > 0 && o < opMax {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint16(o))
}

// Valid reports whether o is a known command.
func (o Op) Valid() bool { return o > 0 && o < opMax }
