// Package proto is the command channel between the verbs library and the host
// daemon: a versioned request/response protocol over a unix SOCK_SEQPACKET
// socket, one message per datagram, file descriptors (memfds, doorbell pipe ends)
// passed alongside with SCM_RIGHTS.
//
// A message is a 16-byte header followed by a JSON body:
//
//	0 magic "vR"   2 version u8   3 kind u8 (request, reply, event)
//	4 op u16       6 code u16 (replies: 0 or an error Code)
//	8 id u32 (a reply carries its request's id)   12 body length u32
//
// A reply larger than one message (MaxMessage) goes as parts of the same
// op, code and id, every one but the last with KindMore set in the kind
// byte; Conn.Recv returns them as one reply (docs/design/command-replies.md).
//
// Commands are rare and not on the data path (work requests travel through
// the shared rings), so bodies favour a self-describing, easily extended
// encoding over speed; docs/design/command-channel.md says why. Everything a
// peer sends is untrusted: Decode checks the header, the length and the body,
// and handlers validate every field.
package proto
