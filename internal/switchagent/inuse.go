package switchagent

import (
	"errors"
	"net"
	"net/url"
	"syscall"

	"github.com/vrdma/vrdma/internal/fabric"
)

// inUseFlag names the daemon flag that sets the address a listener could
// not have because another program holds its port ("" when err is not
// that): the TCP channel's --tcp-listen, or the embedded etcd member's
// --etcd-client-url or --etcd-peer-url, told apart by the address in err.
func inUseFlag(err error, emb *fabric.EmbedOptions) string {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return ""
	}
	if emb == nil {
		return "--tcp-listen"
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		for _, u := range []struct{ raw, flag string }{{emb.ClientURL, "--etcd-client-url"}, {emb.PeerURL, "--etcd-peer-url"}} {
			if p, perr := url.Parse(u.raw); perr == nil && p.Host == op.Addr.String() {
				return u.flag
			}
		}
	}
	return "--etcd-client-url or --etcd-peer-url"
}
