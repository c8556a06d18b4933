package daemon

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vrdma/vrdma/internal/proto"
)

// Names. Every name a client gives the daemon (instance, trust group, port
// group, link, device) is checked before it is used or repeated in a
// reply: 1-63 letters, digits, '.', '_' or '-', starting with a letter or
// digit. A refusal quotes at most quoteMax bytes of what it refuses.
//
// Instance and trust group names are the owner's own: a tenant's "db1" is
// kept as "u<uid>.db1" (its canonical name: in instances.json, on the
// switch, in root's `vm show`) and shown to the tenant as "db1", so that
// another tenant's "db1" is another instance, and no tenant can take a
// name from another (docs/design/tenants.md, "Names"). Root's (uid 0)
// names are kept as they are; the default instance is everyone's.

// maxName is the longest name, canonical or not (a switch record name).
const maxName = 63

// quoteMax bounds how much of a refused name a refusal repeats.
const quoteMax = 64

// quoteName quotes name for a message, cut to quoteMax bytes with its
// length said when it is longer.
func quoteName(name string) string {
	if len(name) <= quoteMax {
		return strconv.Quote(name)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(name[:quoteMax]), len(name))
}

// checkName checks a name of kind (instance, trust group, ...).
func checkName(kind, name string) error {
	if !instanceName.MatchString(name) {
		return proto.Errorf(proto.CodeInvalid, "%s name %s: use 1-%d letters, digits, '.', '_' or '-', starting with a letter or digit", kind, quoteName(name), maxName)
	}
	return nil
}

// tenantPrefix is the prefix of uid's names ("" for root's).
func tenantPrefix(uid uint32) string {
	if uid == 0 {
		return ""
	}
	return "u" + strconv.FormatUint(uint64(uid), 10) + "."
}

// qualify returns the canonical name of owner uid's name (which may be
// canonical already).
func qualify(uid uint32, name string) string {
	p := tenantPrefix(uid)
	if strings.HasPrefix(name, p) {
		return name
	}
	return p + name
}

// tenantOf reports whether a canonical name is in a tenant's namespace
// ("u<uid>." followed by more).
func tenantOf(name string) bool {
	rest, ok := strings.CutPrefix(name, "u")
	if !ok {
		return false
	}
	digits, tail, ok := strings.Cut(rest, ".")
	if !ok || digits == "" || tail == "" {
		return false
	}
	_, err := strconv.ParseUint(digits, 10, 32)
	return err == nil
}

// nameOwner returns the uid whose namespace a canonical instance name is
// in: uid for u<uid>.NAME, root (0) for any other.
func nameOwner(name string) uint32 {
	if !tenantOf(name) {
		return 0
	}
	digits, _, _ := strings.Cut(name[1:], ".")
	uid, _ := strconv.ParseUint(digits, 10, 32)
	return uint32(uid)
}

// canonicalName checks the name of kind that owner gives (for a new
// instance or trust group) and returns its canonical name. A name of
// another's namespace (u<uid>.NAME of another uid) is refused: it would
// read as that uid's. Only root may give one, for a trust group (root
// mixes owners in a group by naming it so).
func canonicalName(kind string, owner uint32, name string) (string, error) {
	if err := checkName(kind, name); err != nil {
		return "", err
	}
	own := tenantPrefix(owner)
	if tenantOf(name) && (own == "" || !strings.HasPrefix(name, own)) && !(owner == 0 && kind == "trust group") {
		return "", proto.Errorf(proto.CodeInvalid, "%s name %s: a name u<uid>.NAME is tenant uid's own%s", kind, quoteName(name), createHint(owner))
	}
	c := qualify(owner, name)
	if len(c) > maxName {
		return "", proto.Errorf(proto.CodeInvalid, "%s name %s: a name of uid %d is at most %d characters (the daemon keeps it as %sNAME)", kind, quoteName(name), owner, maxName-len(own), own)
	}
	return c, nil
}

func createHint(owner uint32) string {
	if owner == 0 {
		return ": give NAME and the owner (--owner) instead"
	}
	return ": pick a name that does not start so"
}

// lookupName checks an instance name a peer gives ("" = the default) and
// returns the canonical name it means to that peer: the default instance,
// a canonical name as it is (u<uid>.NAME: the same for everyone, as root's
// `vm show` lists it), or the instance of that name in the peer's own
// namespace.
func lookupName(c creds, name string) (string, error) {
	if name == "" || name == DefaultInstance {
		return DefaultInstance, nil
	}
	if err := checkName("instance", name); err != nil {
		return "", err
	}
	if !c.known || tenantOf(name) {
		// Canonical already (another's, as root's `vm show` lists it: the
		// caller checks that c may see it), or c has no namespace (its
		// uid is not known: mayAttach refuses it).
		return name, nil
	}
	return qualify(c.uid, name), nil
}

// shownName is a canonical name as viewer sees it: its own without the
// prefix, others' whole.
func shownName(viewer creds, name string) string {
	if !viewer.known {
		return name
	}
	if p := tenantPrefix(viewer.uid); p != "" {
		if rest, ok := strings.CutPrefix(name, p); ok {
			return rest
		}
	}
	return name
}

// ownSpec returns spec with its instance and trust group names made
// canonical for owner uid. asked: a peer gives them, and they are checked
// as new names; otherwise they are the daemon's own (saved, canonical
// already, or from before names were owners').
func ownSpec(spec proto.InstanceSpec, uid uint32, asked bool) (proto.InstanceSpec, error) {
	if !asked {
		spec.Name = qualify(uid, spec.Name)
		if spec.TrustGroup != "" {
			spec.TrustGroup = qualify(uid, spec.TrustGroup)
		}
		return spec, nil
	}
	if spec.Name == DefaultInstance {
		return spec, proto.Errorf(proto.CodeBusy, "instance %q exists already: it is the default instance, every user's; pick another name", DefaultInstance)
	}
	var err error
	if spec.Name, err = canonicalName("instance", uid, spec.Name); err != nil {
		return spec, err
	}
	if spec.TrustGroup != "" {
		if spec.TrustGroup, err = canonicalName("trust group", uid, spec.TrustGroup); err != nil {
			return spec, err
		}
	}
	return spec, nil
}

// shown is a canonical name as s's peer sees it (s nil: the daemon's
// own, whole).
func (s *session) shown(name string) string {
	if s == nil {
		return name
	}
	return shownName(s.cred, name)
}
