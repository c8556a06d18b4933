package pathsel

import "slices"

// A Feature is something an instance's QPs may ask of a device path that
// a daemon's data path on the device may or may not carry yet.
type Feature struct {
	Name string             // as host records and reasons name it: "UD QPs"
	Asks func(Request) bool // whether a request asks it
	// Carried: this build's data path carries it on a device; a host
	// record lists the names of the carried ones (Carried()).
	Carried bool
	// Why it is not carried yet (the engine's refusal), for the docs and
	// `vrdma path`.
	Why string
}

// DeviceFeatures is what the data path on a device (internal/engine
// device.go, device_qp.go) carries, row by row. The change that carries a
// feature flips its row; host records then say so (Carried) and path
// selection takes the device for QPs that ask it.
var DeviceFeatures = []Feature{
	{Name: FeatureRC, Asks: func(Request) bool { return true }, Carried: true},
	{Name: "atomics", Asks: func(r Request) bool { return r.Atomics }, Carried: true},
	{Name: "UD QPs", Asks: func(r Request) bool { return r.UD }, Carried: true},
	{Name: "SRQs", Asks: func(r Request) bool { return r.SRQ }, Carried: true},
	{Name: "inline data", Asks: func(r Request) bool { return r.MaxInline > 0 }, Carried: true},
	{Name: "inline data on UD QPs", Asks: func(r Request) bool { return r.UD && r.MaxInline > 0 },
		Why: "a bound adapter refuses a UD QP that asks for inline data (engine.ErrDeviceQP): the helper's UD post carries no inline bytes"},
}

// FeatureRC is the first row: RC QPs on the device at all. A host record
// that says it carries QPs (carriesQPs) without a list carries this one.
const FeatureRC = "RC QPs"

// Carried lists the names of the features this build's data path carries
// on a device, in DeviceFeatures' order: what its host record says.
func Carried() []string {
	var out []string
	for _, f := range DeviceFeatures {
		if f.Carried {
			out = append(out, f.Name)
		}
	}
	return out
}

// uncarried returns the first feature r asks that the daemon of port p
// does not carry on its device, and its row, or ok false when it carries
// every one.
func uncarried(p Port, r Request) (Feature, bool) {
	for _, f := range DeviceFeatures {
		if f.Asks(r) && !slices.Contains(p.Carries, f.Name) {
			return f, true
		}
	}
	return Feature{}, false
}
