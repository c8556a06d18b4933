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
	opMax
)

var opNames = [...]string{"", "hello", "query_device", "query_port", "alloc_pd", "dealloc_pd", "reg_mr", "dereg_mr",
	"create_cq", "destroy_cq", "create_qp", "modify_qp", "query_qp", "destroy_qp", "create_srq",
	"destroy_srq", "create_ah", "destroy_ah", "create_instance", "delete_instance", "list_instances",
	"stats", "event", "map_mr", "link_add", "link_delete", "list_links"}

func (o Op) String() string {
	if o > 0 && o < opMax {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint16(o))
}

// Valid reports whether o is a known command.
func (o Op) Valid() bool { return o > 0 && o < opMax }
