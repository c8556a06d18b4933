package switchview_test

import (
	"encoding/json"
	"fmt"

	"github.com/vrdma/vrdma/switchview"
)

// A path as `vrdma path --json` prints it: the JSON tags are the daemon's
// reply, so a script reads it with the same names.
func ExamplePath() {
	p := switchview.Path{Kind: "rdma", Reason: "hosts host1 (eth0) and host2 (eth0) both have an RDMA uplink on port group default",
		HostA: "host1", HostB: "host2"}
	b, _ := json.Marshal(p)
	fmt.Println(string(b))
	// Output:
	// {"kind":"rdma","reason":"hosts host1 (eth0) and host2 (eth0) both have an RDMA uplink on port group default","host_a":"host1","host_b":"host2"}
}
