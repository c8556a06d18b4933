package daemon

import (
	"strings"

	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pathsel"
	"github.com/vrdma/vrdma/internal/switchagent"
	"github.com/vrdma/vrdma/switchview"
)

// boundPaths says, for each verbs uplink of this host that is up, how
// instances bound to it (`vrdma vm create --uplink`) reach host h's
// instances: those bound to a verbs uplink of h (the first whose path
// works, else the first's refusal) and those not bound. `vrdma host show`
// prints them under the host's path, which is that of unbound instances.
func boundPaths(sw *switchagent.Agent, self, h fabric.Host) []switchview.BoundPath {
	mine, theirs := sw.HostEnd(self), sw.HostEnd(h)
	mine.Adapter = "an instance on host " + self.Name
	theirs.Adapter = "an instance on host " + h.Name
	var out []switchview.BoundPath
	for _, p := range mine.Verbs {
		a := mine
		a.Bound = p.Name
		bp := switchview.BoundPath{Uplink: p.Name, ToUnbound: pathText(pathsel.Select(a, theirs))}
		bp.ToBound = "none: host " + h.Name + " has no verbs uplink that is up"
		for i, q := range theirs.Verbs {
			b := theirs
			b.Bound = q.Name
			c, err := pathsel.Select(a, b)
			if i == 0 || err == nil {
				bp.ToBound = pathText(c, err)
			}
			if err == nil {
				break
			}
		}
		out = append(out, bp)
	}
	return out
}

// pathText is a choice as `vrdma host show` prints it, "none: why" for no
// path.
func pathText(c pathsel.Choice, err error) string {
	if err != nil {
		return "none: " + strings.TrimPrefix(err.Error(), pathsel.ErrNoPath.Error()+": ")
	}
	return c.String()
}
