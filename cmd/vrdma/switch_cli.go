package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/vrdma/vrdma"
)

// Helpers shared by the switch's commands (switch, portgroup, host, path)
// and vm: subcommands, flags among the arguments, tables and JSON.

// subcommand splits off the subcommand, def when the arguments start with
// a flag or there are none (`vrdma portgroup` shows the port groups), and
// "help" for a help flag before any subcommand (`vrdma portgroup -h`: the
// command's help, every subcommand's usage).
func subcommand(args []string, def string) (string, []string) {
	if len(args) > 0 && isHelpFlag(args[0]) {
		return "help", args[1:]
	}
	if len(args) == 0 || len(args[0]) > 1 && args[0][0] == '-' {
		return def, args
	}
	return args[0], args[1:]
}

// isHelpFlag reports whether arg asks for help, as the flag package takes it.
func isHelpFlag(arg string) bool {
	return arg == "-h" || arg == "--h" || arg == "-help" || arg == "--help"
}

// newFlagSet is a flag set for `vrdma NAME` with the --socket flag every
// client command takes, and a usage message led by use.
func newFlagSet(name, use string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	socket := fs.String("socket", "", "daemon socket `PATH` (default $VRDMA_SOCKET or "+vrdma.DefaultSocket+")")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: vrdma %s\n\n", use)
		fs.PrintDefaults()
	}
	return fs, socket
}

// parseArgs parses fs's flags wherever they stand among args (the flag
// package stops at the first other argument) and returns the others in
// order. After "--" everything is an argument.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// withAdmin runs f on an administration connection to the daemon at
// socket ("" = $VRDMA_SOCKET or the default), closed afterwards.
func withAdmin(socket string, f func(*vrdma.Admin) error) error {
	adm, err := vrdma.DialAdmin(vrdma.Options{Socket: socket, Client: "vrdma"})
	if err != nil {
		return err
	}
	defer adm.Close()
	return f(adm)
}

// newTable returns a writer that aligns tab-separated columns; Flush it.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// printJSON prints v indented, as --json asks.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// orDash prints an empty field as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
