// Package fakelink is an in-process network of links for tests: each Link
// implements engine.Link with GIDs made from its MAC and addresses, and the
// Network carries frames between them by destination IP address, with
// seeded loss, duplication, reordering, corruption and delay. Daemons in
// one test process then talk RoCEv2 to each other, frame for frame as they
// would over UDP, without root or network namespaces.
package fakelink
