package verbs

import "golang.org/x/sys/unix"

// CMUDListen listens for SIDR requests on a (as CMListen, for UD QPs):
// an rdma_cm id of the UDP port space. Its requests come as
// CMConnectRequest events with UD set; answer them with CMUDAccept or
// CMReject.
func (d *Device) CMUDListen(a CMAddr, backlog uint32) (id uint32, port uint16, err error) {
	req := AppendCMListen(nil, backlog, a)
	ne.PutUint16(req[4:], uint16(OpCMUDListen)) // the RC op's layout, the UD op
	body, err := d.h.Call(req)
	if err != nil {
		return 0, 0, err
	}
	if id, port, err = ParseCMID(body, true); err != nil {
		return 0, 0, d.failed(err)
	}
	return id, port, nil
}

// CMUDConnect starts a SIDR exchange with p.Dst: the helper resolves the
// address and the route and sends the SIDR_REQ with p.PrivateData. The
// events say how it went: CMEstablished with UD set (the peer's QPN, Q_Key
// and address handle), CMUnreachable (a SIDR_REP status, or a negative
// errno: -ETIMEDOUT), or the error of the step that failed.
func (d *Device) CMUDConnect(p CMConnectParam) (uint32, error) {
	if len(p.PrivateData) > MaxCMPrivateData {
		return 0, &Error{Kind: ErrDevice, Errno: int32(unix.EINVAL), Msg: "private data over 256 bytes"}
	}
	req := AppendCMConnect(nil, p)
	ne.PutUint16(req[4:], uint16(OpCMUDConnect)) // the RC op's layout, the UD op
	body, err := d.h.Call(req)
	if err != nil {
		return 0, err
	}
	id, _, err := ParseCMID(body, false)
	if err != nil {
		return 0, d.failed(err)
	}
	return id, nil
}

// CMUDAccept answers a SIDR request on id with the SIDR_REP naming the
// device's UD QP qpn; the kernel puts in its Q_Key (RDMAUDPQKey for an IP
// address).
func (d *Device) CMUDAccept(id, qpn uint32, pdata []byte) error {
	if len(pdata) > MaxCMPrivateData {
		return &Error{Kind: ErrDevice, Errno: int32(unix.EINVAL), Msg: "private data over 256 bytes"}
	}
	return d.callEmpty(AppendCMUDAccept(nil, id, qpn, pdata))
}
