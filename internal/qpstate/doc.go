// Package qpstate is the IBTA queue pair state machine: which transitions
// exist (RESET, INIT, RTR, RTS, SQD, SQE, ERR), which attributes each
// transition requires and allows for each QP type, and the range of every
// attribute. The daemon is its authority; the library uses the same tables to
// report a mistake before a round trip.
//
//	if err := qpstate.Check(abi.QPTypeRC, cur, &attr, mask, limits); err != nil {
//		// *qpstate.Error says which attribute is missing, extra or out of range
//	}
package qpstate
