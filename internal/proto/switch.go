package proto

import "github.com/vrdma/vrdma/switchview"

// The distributed switch's commands (switch_show, portgroup_*, host_list,
// path, mcast_list). Their replies are package switchview's records, which
// the library returns as they come: switch_show a switchview.Switch,
// host_list a switchview.HostList, portgroup_list a
// switchview.PortGroupList, path a switchview.Path, mcast_list a
// switchview.McastList; portgroup_add and portgroup_delete take a
// switchview.PortGroup (delete reads only its name). switchview imports
// nothing of the module, so the library does not link the etcd client.

// PathReq names two adapters as INSTANCE/vrdmaN (or INSTANCE for vrdma0).
type PathReq struct {
	A string `json:"a"`
	B string `json:"b"`
	// Request is what the QPs ask of the path; nil: nothing special.
	Request *switchview.PathRequest `json:"request,omitempty"`
}
