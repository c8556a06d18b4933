// Package cm is the connection manager's vocabulary: the messages that
// connect a pair of queue pairs (REQ, REP, RTU), refuse a request (REJ)
// and end a connection (DREQ, DREP), as the IBTA communication manager
// defines them (IBTA vol. 1, chapter 12), with rdma_cm's limits on their
// private data and IBTA's reject reasons. Package connmgr runs them
// between the adapters of one host as they are, and between hosts as CM
// MADs on QP1 (package ibcm encodes those).
//
//	var m cm.Message = &cm.RTU{LocalID: 7, RemoteID: 9}
//	local, remote := m.IDs() // 7, 9
package cm
