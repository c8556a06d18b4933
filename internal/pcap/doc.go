// Package pcap reads and writes classic libpcap capture files (not pcapng)
// and strips link-layer headers to reach the IP packet.
//
// A Reader accepts microsecond and nanosecond files in either byte order;
// a Writer writes little-endian files with microsecond or nanosecond
// timestamps. IPPayloadOfFrame understands Ethernet (with one 802.1Q or
// 802.1ad tag), raw IP and Linux cooked (SLL) frames.
package pcap
