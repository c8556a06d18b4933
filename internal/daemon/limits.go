package daemon

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/vrdma/vrdma/internal/engine"
)

// Resource is a kind of thing the daemon counts against a tenant's limits.
type Resource uint8

// The resources the daemon limits, per uid and per instance.
const (
	Sessions    Resource = iota // connections to the daemon
	Instances                   // instances owned (per uid only)
	PDs                         // protection domains
	CQs                         // completion queues
	QPs                         // queue pairs
	MRs                         // memory regions
	SRQs                        // shared receive queues
	AHs                         // address handles
	Locked                      // bytes of registered memory the daemon locks
	CMListeners                 // connection manager listeners: ports of the host's one port space
	CMConns                     // connection manager connections and requests, until their last event is delivered
	Ring                        // bytes the daemon allocates for queues: shared rings and its own state of them (engine.QPBytes)
	MWs                         // memory windows
	Mcast                       // multicast attachments: a UD QP attached to a group (cmd_mcast.go)
	XRCDs                       // handles of XRC domains (each open, shared or not)
	numResources
)

var resourceNames = [numResources]string{"session", "instance", "pd", "cq", "qp", "mr", "srq", "ah", "locked", "cmlisten", "cmconn", "ring", "mw", "mcast", "xrcd"}

// String returns the name a limit flag uses for r ("qp", "locked", ...).
func (r Resource) String() string {
	if r < numResources {
		return resourceNames[r]
	}
	return fmt.Sprintf("resource(%d)", uint8(r))
}

// Unlimited is the value of a limit that does not limit (up to what the
// device can hold: max_qp and the like are caps in any case).
const Unlimited = math.MaxUint64

// Limits maps resources to how many of each a tenant may hold; a resource
// not in the map has its default. ParseLimits reads them from a flag.
type Limits map[Resource]uint64

// String formats l as ParseLimits reads it, in resource order.
func (l Limits) String() string {
	keys := make([]Resource, 0, len(l))
	for r := range l {
		keys = append(keys, r)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	var b strings.Builder
	for i, r := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r.String())
		b.WriteByte('=')
		if l[r] == Unlimited {
			b.WriteString("unlimited")
		} else {
			b.WriteString(strconv.FormatUint(l[r], 10))
		}
	}
	return b.String()
}

// ParseLimits reads "qp=4096,cq=4096,locked=16G,session=unlimited": a
// comma-separated list of RESOURCE=N, where RESOURCE is session, instance,
// pd, cq, qp, mr, srq, ah, locked (bytes), cmlisten, cmconn, ring (bytes), mw or mcast, and N a
// count with an optional binary suffix (K, M, G, T: 16G is 16 GiB) or "unlimited". A resource may
// appear once; an empty string is no limit at all (the defaults).
func ParseLimits(s string) (Limits, error) {
	l := Limits{}
	if strings.TrimSpace(s) == "" {
		return l, nil
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		key, val, ok := strings.Cut(item, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("limit %q: write RESOURCE=N, e.g. qp=4096 (resources: %s)", item, strings.Join(resourceNames[:], ", "))
		}
		r, ok := resourceByName(strings.TrimSpace(key))
		if !ok {
			return nil, fmt.Errorf("limit %q: unknown resource %q: use one of %s", item, key, strings.Join(resourceNames[:], ", "))
		}
		if _, dup := l[r]; dup {
			return nil, fmt.Errorf("limit %q: %s is limited twice", item, r)
		}
		n, err := parseCount(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("limit %q: %v", item, err)
		}
		l[r] = n
	}
	return l, nil
}

func resourceByName(name string) (Resource, bool) {
	for i, n := range resourceNames {
		if strings.EqualFold(n, name) || strings.EqualFold(n+"s", name) {
			return Resource(i), true
		}
	}
	return 0, false
}

// parseCount reads a count: digits with an optional K, M, G or T (powers
// of 1024), or "unlimited".
func parseCount(s string) (uint64, error) {
	if strings.EqualFold(s, "unlimited") {
		return Unlimited, nil
	}
	shift := 0
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			shift = 10
		case 'm', 'M':
			shift = 20
		case 'g', 'G':
			shift = 30
		case 't', 'T':
			shift = 40
		}
		if shift > 0 {
			s = s[:n-1]
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a count: give digits with an optional K, M, G or T, or \"unlimited\"", s)
	}
	if v > Unlimited>>shift {
		return 0, fmt.Errorf("%d<<%d does not fit in 64 bits: say \"unlimited\"", v, shift)
	}
	return v << shift, nil
}

// limitSet is a resolved set of limits, one per resource.
type limitSet [numResources]uint64

// deviceMax is what one adapter can hold of each resource: a limit above
// it is that. The device attributes advertise the smaller of the two.
var deviceMax = limitSet{
	Sessions: Unlimited, Instances: Unlimited,
	PDs: 1 << 14, CQs: 1 << 14, QPs: engine.MaxQP, MRs: engine.MaxMR, SRQs: 1 << 12, AHs: 1 << 16,
	Locked: Unlimited, CMListeners: 1<<16 - 1, CMConns: Unlimited, Ring: Unlimited,
	MWs:   engine.MaxMR, // windows share the key table with regions
	Mcast: engine.MaxTotalMcastQPAttach,
	XRCDs: 1 << 14,
}

// fdCost is how many descriptors the daemon holds for one of each
// resource: a session's socket; a CQ's ring memfd and its notification
// pipe; a QP's ring memfd and its doorbell pipe (an async adapter's QPs
// share the poller's); an SRQ's ring; a region's memfd.
var fdCost = limitSet{Sessions: 1, CQs: 3, QPs: 3, SRQs: 1, MRs: 1}

// nominalUserLimits are the per-uid defaults on a daemon with descriptors
// to spare; defaultUserLimits scales the descriptor-holding ones down when
// there are fewer.
//
// The connection manager's are about the daemon's memory and the host's
// port space, not descriptors: a listener holds one of 65,535 ports that
// all tenants share (256 per uid: a few hundred uids before they run
// out, not three); a connection holds its state and up to three events
// for its client, about 1 KiB (4096 per uid, one per QP: a few MiB
// however many sessions the uid opens).
var nominalUserLimits = limitSet{
	Sessions: 1024, Instances: 256,
	PDs: 4096, CQs: 4096, QPs: 4096, MRs: 16384, SRQs: 1024, AHs: 65536,
	CMListeners: 256, CMConns: 4096, MWs: 16384, Mcast: 4096, XRCDs: 4096,
}

// userShare is the part of the daemon's descriptors one uid may hold with
// the default limits: 1/userShare.
const userShare = 4

// defaultUserLimits returns the per-uid defaults for a daemon that may
// hold fdBudget descriptors for its clients and a host of memBytes of RAM:
// the descriptor-holding resources are scaled so that one uid holding its
// whole quota of every one of them holds at most a quarter of the budget
// (never below a floor that keeps the defaults usable), a uid may lock
// a quarter of the host's memory and have the daemon allocate a
// sixteenth of it for its queues.
func defaultUserLimits(fdBudget, memBytes uint64) limitSet {
	l := nominalUserLimits
	var need uint64
	for r := range numResources {
		need += l[r] * fdCost[r]
	}
	share := fdBudget / userShare
	if need > share {
		for r := range numResources {
			if fdCost[r] == 0 {
				continue
			}
			floor := uint64(16)
			if Resource(r) == Sessions {
				floor = 64 // a process opens one per device, and admin connections
			}
			l[r] = max(l[r]*share/need, floor)
		}
	}
	l[Locked], l[Ring] = Unlimited, Unlimited
	if memBytes > 0 {
		l[Locked] = memBytes / userShare
		l[Ring] = memBytes / userRingShare
	}
	return l
}

// totalShare is the part of the host's memory all tenants together may
// have the daemon lock by default: 1/totalShare.
const totalShare = 2

// userRingShare and totalRingShare are the parts of the host's memory one
// uid, and all tenants together, may have the daemon allocate for queues
// by default (Ring): 1/16 and 1/8. With the locked shares, one uid takes
// at most 1/4 + 1/16 of the host's memory, all tenants 1/2 + 1/8
// (docs/design/accounting.md).
const (
	userRingShare  = 16
	totalRingShare = 8
)

// defaultTotalLimits returns the daemon-wide defaults for a host of
// memBytes of RAM: all tenants together may lock half of it and have an
// eighth allocated for their queues; nothing else is capped daemon-wide
// (the descriptor reserve bounds what holds descriptors).
func defaultTotalLimits(memBytes uint64) limitSet {
	var l limitSet
	for r := range numResources {
		l[r] = Unlimited
	}
	if memBytes > 0 {
		l[Locked] = memBytes / totalShare
		l[Ring] = memBytes / totalRingShare
	}
	return l
}

// resolveTotal fills the daemon-wide limits: the defaults, then what the
// configuration says. One adapter's maxima do not cap them.
func resolveTotal(defaults limitSet, cfg Limits) limitSet {
	out := defaults
	for r, v := range cfg {
		if r < numResources {
			out[r] = v
		}
	}
	return out
}

// resolve fills a limit set: the defaults, then what the configuration
// says, each capped by what the device can hold.
func resolve(defaults limitSet, cfg Limits) limitSet {
	out := defaults
	for r, v := range cfg {
		if r < numResources {
			out[r] = v
		}
	}
	for r := range numResources {
		out[r] = min(out[r], deviceMax[r])
	}
	return out
}
