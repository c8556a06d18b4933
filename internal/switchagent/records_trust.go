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
// that has them.
func (a *Agent) signedRecord() (fabric.Host, error) {
	h := a.Record()
	m := a.cfg.Member
	if m == nil {
		return h, nil
	}
	h.Cert, h.Sig = m.CertPEM(), ""
	data, err := json.Marshal(h)
	if err != nil {
		return h, err
	}
	h.Sig, err = m.Sign(data)
	return h, err
}

// trusted returns the part of a host record this daemon believes (see
// above), or why it believes none of it.
func (a *Agent) trusted(h fabric.Host) (fabric.Host, error) {
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
	h.Addrs = coveredOnly(leaf, h.Addrs)
	h.Uplinks = append([]fabric.Uplink(nil), h.Uplinks...)
	for i := range h.Uplinks {
		h.Uplinks[i].GIDs = coveredOnly(leaf, h.Uplinks[i].GIDs)
	}
	return h, nil
}

// coveredOnly keeps the addresses the certificate lists, and link-local
// ones.
func coveredOnly(leaf *x509.Certificate, addrs []string) []string {
	var out []string
	for _, s := range addrs {
		ip, err := netip.ParseAddr(s)
		if err == nil && (ip.Unmap().IsLinkLocalUnicast() || pki.Covers(leaf, ip)) {
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
	keep := func(addrs []string) []string {
		kept := coveredOnly(m.Leaf, addrs)
		if len(kept) != len(addrs) {
			for _, s := range addrs {
				if !contains(kept, s) {
					dropped = append(dropped, s)
				}
			}
		}
		return kept
	}
	h.Addrs = keep(h.Addrs)
	for i := range h.Uplinks {
		h.Uplinks[i].GIDs = keep(h.Uplinks[i].GIDs)
	}
	if len(dropped) > 0 {
		a.uncovered.Log(a.log, slog.LevelWarn, "switch: this host's certificate does not list some of its addresses: the other hosts will not route to them",
			"addresses", dropped, "fix", fmt.Sprintf("issue host %s a certificate with --ip for each (vrdma host cert %s --ip ADDR,...)", a.hostName, a.hostName))
	}
	return h
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// selfHeal writes this host's record again when the watch shows it gone
// or not as this daemon wrote it (another member deleted or altered it).
func (a *Agent) selfHeal(seen fabric.Host, gone bool) {
	if a.closing.Load() || a.ctx.Err() != nil {
		return
	}
	if !gone {
		a.regMu.Lock()
		same := a.written.Sig == seen.Sig && a.written.Sig != "" || a.cfg.Member == nil
		a.regMu.Unlock()
		if same {
			return
		}
	}
	a.healed.Add(1)
	a.log.Warn("switch: this host's record was deleted or altered by someone else: writing it again", "gone", gone)
	go func() {
		ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
		defer cancel()
		if err := a.register(ctx); err != nil && a.ctx.Err() == nil {
			a.log.Warn("switch: could not write this host's record again", "err", err)
		}
	}()
}
