package engine

// FirstQPN is the lowest QPN a host gives a QP: 0 and 1 are the special
// QPs, as on every RoCE device.
const FirstQPN = firstQPN

// MaxQPN is the highest QPN (QPNs are 24 bits).
const MaxQPN = 0xFFFFFF

// StartQPNsAt makes the host number its next QPs from n (clamped to
// FirstQPN..MaxQPN), so that the QPNs of two hosts, such as two users'
// daemons on one machine, start apart. Call it before the first QP.
func (h *Host) StartQPNsAt(n uint32) {
	h.qpMu.Lock()
	h.nextQPN = min(max(n, firstQPN), MaxQPN)
	h.qpMu.Unlock()
}
