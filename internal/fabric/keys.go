package fabric

import (
	"strconv"
	"strings"
)

// Key layout. Everything of switch <sw> lives under /vrdma/<sw>/:
//
//	/vrdma/<sw>/switch                          Switch            (no lease)
//	/vrdma/<sw>/portgroups/<name>               PortGroup         (no lease)
//	/vrdma/<sw>/hosts/<name>                    Host              (host daemon's lease)
//	/vrdma/<sw>/instances/<name>                Instance          (no lease)
//	/vrdma/<sw>/sm/candidates/<host>            candidate         (candidate's lease)
//	/vrdma/<sw>/sm/election/<lease-id-hex>      election key      (candidate's lease; concurrency.Election)
//	/vrdma/<sw>/sm/assign/<instance>/<index>    Assignment        (no lease; written by the subnet manager)
//	/vrdma/<sw>/sm/assign/default@<host>/<index> Assignment of a host's default instance (HostDefaultInstance)
//	/vrdma/<sw>/mcast/<host>/<tenant>/<group>   McastGroup        (host daemon's lease; tenant "uid N" as uid_N)
//
// Names never contain '/', so a prefix ending in '/' lists exactly one kind.
const rootPrefix = "/vrdma/"

// keyspace builds the keys of one switch.
type keyspace struct{ base string }

func newKeyspace(sw string) keyspace { return keyspace{base: rootPrefix + sw + "/"} }

func (k keyspace) switchKey() string         { return k.base + "switch" }
func (k keyspace) portGroups() string        { return k.base + "portgroups/" }
func (k keyspace) portGroup(n string) string { return k.portGroups() + n }
func (k keyspace) hosts() string             { return k.base + "hosts/" }
func (k keyspace) host(n string) string      { return k.hosts() + n }
func (k keyspace) instances() string         { return k.base + "instances/" }
func (k keyspace) instance(n string) string  { return k.instances() + n }
func (k keyspace) candidates() string        { return k.base + "sm/candidates/" }
func (k keyspace) candidate(n string) string { return k.candidates() + n }
func (k keyspace) election() string          { return k.base + "sm/election" }
func (k keyspace) assignments() string       { return k.base + "sm/assign/" }
func (k keyspace) mcastGroups() string       { return k.base + "mcast/" }
func (k keyspace) mcastGroup(host, tenant, group string) string {
	return k.mcastGroups() + host + "/" + tenant + "/" + group
}
func (k keyspace) assignment(inst string, idx int) string {
	return k.assignments() + inst + "/" + strconv.Itoa(idx)
}

// nameOf returns the last path element of key.
func nameOf(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[i+1:]
	}
	return key
}
