package engine

import "github.com/vrdma/vrdma/internal/abi"

// scratch is a worker's private working memory, so that executing a work
// request allocates nothing.
type scratch struct {
	entry []byte // private copy of the send WQE being executed
	wqe   abi.SendWQE
	rwqe  abi.RecvWQE
	src   [abi.MaxSGE + 1][]byte
	dst   [abi.MaxSGE + 1][]byte
	held  [2*abi.MaxSGE + 2]*MR
	nheld int
	grh   [abi.GRHSize]byte
	word  [8]byte
	// rx is where the responder of the operation being executed receives:
	// set for an XRC target, whose SRQ, PD and CQ the request names.
	rx recvSide
}

// recvSide is an XRC SRQ a request to a target QP is received into.
type recvSide struct {
	rq *RQ
	pd *PD
	cq *CQ
}

func (s *scratch) init(stride int) { s.entry = make([]byte, stride) }

func (s *scratch) hold(m *MR) { s.held[s.nheld] = m; s.nheld++ }

func (s *scratch) releaseAll() {
	for i := 0; i < s.nheld; i++ {
		s.held[i].release()
		s.held[i] = nil
	}
	s.nheld = 0
}

// resolve turns a scatter/gather list into byte spans of registered memory
// of pd, checking each key, bound and the need access flag. It returns the
// spans, their total length and the status to report on failure
// (LOC_PROT_ERR, or LOC_LEN_ERR for a total above 2^31).
func (s *scratch) resolve(a *Adapter, pd *PD, sgl []abi.SGE, need abi.Access, out [][]byte) ([][]byte, uint64, abi.Status) {
	out = out[:0]
	var total uint64
	for _, e := range sgl {
		if e.Length == 0 {
			continue
		}
		mr := a.lookupMR(e.LKey)
		if mr == nil || mr.pd != pd || mr.access&need != need {
			return out, 0, abi.StatusLocProtErr
		}
		if !mr.acquire() {
			return out, 0, abi.StatusLocProtErr
		}
		s.hold(mr)
		b := mr.span(e.Addr, e.Length)
		if b == nil {
			return out, 0, abi.StatusLocProtErr
		}
		out = append(out, b)
		total += uint64(e.Length)
	}
	if total > 1<<31 {
		return out, 0, abi.StatusLocLenErr
	}
	return out, total, abi.StatusSuccess
}

// remote returns n bytes at addr of the region or memory window with rkey
// on responder p's adapter, if it grants p's requester need (MR.grants).
func (s *scratch) remote(p *QP, rkey uint32, addr uint64, n uint32, need abi.Access) []byte {
	mr := p.adapter.lookupRKey(rkey)
	if !mr.grantsIn(p, p.respPD(s), need) || !mr.acquire() {
		return nil
	}
	s.hold(mr)
	return mr.span(addr, n)
}

// scatter copies the concatenation of src into the concatenation of dst and
// returns the bytes copied (the smaller of the two totals).
func scatter(dst, src [][]byte) int {
	n, di, doff := 0, 0, 0
	for _, s := range src {
		for len(s) > 0 && di < len(dst) {
			c := copy(dst[di][doff:], s)
			s = s[c:]
			n += c
			doff += c
			if doff == len(dst[di]) {
				di++
				doff = 0
			}
		}
	}
	return n
}
