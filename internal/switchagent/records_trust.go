package switchagent

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/vrdma/vrdma/internal/fabric"
	"github.com/vrdma/vrdma/internal/pki"
)

// Host records are what other daemons route by, and every member may write
// the switch's etcd. So on a switch whose daemons have certificates a
// record counts only as its host wrote it: it carries the host's
// certificate and is signed with its key, and of its addresses and GIDs
// only those the certificate lists count — and link-local GIDs, which no
// certificate lists and which reach only the segment. A member can
// therefore neither forge another host's record nor claim another host's
// addresses in its own. A GID that two records still claim (two link-local
// GIDs alike, or two certificates issued for one address) routes to
// neither (routes.go). A record this daemon wrote that someone else
// altered or deleted is written again (selfHeal).

// ErrRecord is the error of a host record a daemon does not take.
var ErrRecord = errors.New("switch: host record refused")

// signedRecord is Record, signed with the host's certificate on a switch
// that has them, for the lease it goes under.
func (a *Agent) signedRecord(lease fabric.LeaseID) (fabric.Host, error) {
	h := a.Record()
	m := a.cfg.Member
	if m == nil {
		return h, nil
	}
	h.Cert, h.Sig, h.Lease = m.CertPEM(), "", lease
	data, err := json.Marshal(h)
	if err != nil {
		return h, err
	}
	h.Sig, err = m.Sign(data)
	return h, err
}

// trusted returns the part of a host record this daemon believes (see
// above), put under lease, or why it believes none of it.
func (a *Agent) trusted(h fabric.Host, lease fabric.LeaseID) (fabric.Host, error) {
	m := a.cfg.Member
	if m == nil {
		return h, nil
	}
	unsigned := h
	unsigned.Sig = ""
	data, err := json.Marshal(unsigned)
	if err != nil {
		return fabric.Host{}, err
	}
	leaf, name, err := m.VerifySigned(h.Cert, data, h.Sig)
	if err != nil {
		return fabric.Host{}, fmt.Errorf("%w: %q: %w", ErrRecord, h.Name, err)
	}
	if name != h.Name {
		return fabric.Host{}, fmt.Errorf("%w: the record of host %q is signed by host %s", ErrRecord, h.Name, name)
	}
	if h.Lease == fabric.NoLease || h.Lease != lease {
		return fabric.Host{}, fmt.Errorf("%w: host %s's record is a copy (signed for lease %x, put under %x)", ErrRecord, h.Name, h.Lease, lease)
	}
	h.Addrs = coveredOnly(leaf, h.Addrs, false)
	h.Uplinks = append([]fabric.Uplink(nil), h.Uplinks...)
	for i := range h.Uplinks {
		u := &h.Uplinks[i]
		kept := coveredOnly(leaf, u.GIDs, u.Kind == fabric.UplinkRXE || u.Kind == fabric.UplinkVerbs)
		u.GIDTypes, u.GIDs = keptGIDTypes(*u, kept), kept
	}
	return h, nil
}

// recordTrust is the judge of records for the watch and for registering
// over a record already there: nil (take everything) on a switch without
// certificates.
func (a *Agent) recordTrust() func(fabric.Host, fabric.LeaseID) (fabric.Host, error) {
	if a.cfg.Member == nil {
		return nil
	}
	return a.trusted
}

// provenGIDs are the addresses of a trusted record that name its host
// beyond doubt: on a switch with certificates, all but its link-local
// GIDs, which no certificate lists.
func (a *Agent) provenGIDs(h fabric.Host) map[[16]byte]bool {
	gids := hostGIDs(h)
	if a.cfg.Member != nil {
		for g := range gids {
			if unprovable(g) {
				delete(gids, g)
			}
		}
	}
	return gids
}

// unprovable reports whether a GID is IPv6 link-local: no certificate
// lists it.
func unprovable(g [16]byte) bool {
	a := netip.AddrFrom16(g)
	return !a.Is4In6() && a.IsLinkLocalUnicast()
}

// coveredOnly keeps the addresses the certificate lists and, for an RDMA
// uplink's GIDs (linkLocal), IPv6 link-local ones: no certificate can list
// those, they reach only the segment, and they count for RDMA routing only
// (routes.go: unproven).
func coveredOnly(leaf *x509.Certificate, addrs []string, linkLocal bool) []string {
	var out []string
	for _, s := range addrs {
		ip, err := netip.ParseAddr(s)
		if err == nil && (pki.Covers(leaf, ip) || linkLocal && ip.Is6() && !ip.Is4In6() && ip.IsLinkLocalUnicast()) {
			out = append(out, s)
		}
	}
	return out
}

// ownRecord keeps this host's own record within what its certificate
// vouches for (the others would drop the rest), and says what it left out
// and how to fix that (at most every ten minutes).
func (a *Agent) ownRecord(h fabric.Host) fabric.Host {
	m := a.cfg.Member
	if m == nil {
		return h
	}
	var dropped []string
	keep := func(addrs []string, linkLocal bool) []string {
		kept := coveredOnly(m.Leaf, addrs, linkLocal)
		if len(kept) != len(addrs) {
			for _, s := range addrs {
				if !contains(kept, s) {
					dropped = append(dropped, s)
				}
			}
		}
		return kept
	}
	h.Addrs = keep(h.Addrs, false)
	for i := range h.Uplinks {
		u := &h.Uplinks[i]
		kept := keep(u.GIDs, u.Kind == fabric.UplinkRXE || u.Kind == fabric.UplinkVerbs)
		u.GIDTypes, u.GIDs = keptGIDTypes(*u, kept), kept
	}
	if len(dropped) > 0 {
		a.uncovered.Log(a.log, slog.LevelWarn, "switch: this host's certificate does not list some of its addresses: the other hosts will not route to them",
			"addresses", dropped, "fix", fmt.Sprintf("issue host %s a certificate with --ip for each (vrdma host cert %s --ip ADDR,...)", a.hostName, a.hostName))
	}
	return h
}

// keptGIDTypes returns the types of the GIDs of u that kept holds (a
// subsequence of u.GIDs), so that a verbs uplink's GIDTypes stay one per
// GID; nil when u has none.
func keptGIDTypes(u fabric.Uplink, kept []string) []string {
	if len(u.GIDTypes) != len(u.GIDs) {
		return nil
	}
	var out []string
	j := 0
	for i, g := range u.GIDs {
		if j < len(kept) && kept[j] == g {
			out = append(out, u.GIDTypes[i])
			j++
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// selfHeal asks the healer to write this host's record again: the watch
// showed it removed, or a record under its name that is not the one this
// daemon wrote. The requests coalesce: however many alterations come, one
// rewrite at a time, at most one waiting.
func (a *Agent) selfHeal(why string) {
	if a.closing.Load() || a.ctx.Err() != nil {
		return
	}
	select {
	case a.heal <- why:
	default: // one is waiting already
	}
}

// healMinGap spaces rewrites of this host's record: an attacker who keeps
// altering it costs one write per gap, not one per alteration.
const healMinGap = 200 * time.Millisecond

// healer writes this host's record again when selfHeal asks, until the
// agent leaves.
func (a *Agent) healer() {
	defer a.wg.Done()
	for {
		var why string
		select {
		case <-a.ctx.Done():
			return
		case why = <-a.heal:
		}
		if a.closing.Load() {
			return
		}
		a.healed.Add(1)
		a.refuseLog.Log(a.log, slog.LevelWarn, "switch: this host's record was deleted or altered by someone else: writing it again", "why", why)
		ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
		if err := a.register(ctx); err != nil && a.ctx.Err() == nil {
			a.log.Warn("switch: could not write this host's record again", "err", err)
		}
		cancel()
		select {
		case <-a.ctx.Done():
			return
		case <-time.After(healMinGap):
		}
	}
}

// wroteLast reports whether h is the record this daemon wrote last.
func (a *Agent) wroteLast(h fabric.Host) bool {
	a.regMu.Lock()
	defer a.regMu.Unlock()
	if a.cfg.Member == nil {
		return true // unsigned records: nothing to tell them apart by
	}
	return a.written.Sig != "" && a.written.Sig == h.Sig
}
