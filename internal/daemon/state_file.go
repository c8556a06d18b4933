package daemon

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// stateFileMode is the mode of every file the daemon writes in its state
// directory: they name tenants, their owners and their trust groups, which
// other users of the host have no business reading.
const stateFileMode = 0o600

// writeState saves v as indented JSON in the state directory dir's file name,
// replacing it whole (a crash leaves the old file or the new, never half
// of one), readable by the daemon's user alone (stateFileMode: a stale
// temporary file is removed, not reused with its mode).
func writeState(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, stateFileMode)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}
