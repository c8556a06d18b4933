// Package abi is the contract between the verbs library and the host daemon:
// the ibverbs enumerations (opcodes, completion statuses, access flags, QP
// types and states, events, MTUs), the layout of the shared-memory rings and
// the byte layout of their entries (send and receive work requests,
// completions), with parse/append pairs.
//
// Everything the daemon reads from a ring is untrusted: Parse functions
// validate every field and return errors that map to the completion status
// the standard gives (LOC_QP_OP_ERR, LOC_LEN_ERR, ...).
//
// The values of the enumerations are those of libibverbs (verbs.h), so a
// number in a log means the same thing to anyone who knows ibverbs.
package abi
