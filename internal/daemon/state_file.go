package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// writeState saves v as indented JSON in the state directory's file name,
// replacing it whole (a crash leaves the old file or the new, never half
// of one).
func (d *Daemon) writeState(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.cfg.StateDir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(d.cfg.StateDir, name+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(d.cfg.StateDir, name))
}
