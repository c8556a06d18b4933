package main

import (
	"fmt"
	"io"
	"strings"
)

// runHelpCommand prints the help of the command (and subcommand) args name, as
// `vrdma COMMAND [SUBCOMMAND] -h` does.
func runHelpCommand(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return nil
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		if c.name == "help" {
			return runHelpCommand(args[1:], stdout, stderr)
		}
		if c.name == "version" {
			fmt.Fprintln(stdout, "usage: vrdma version (or vrdma --version): prints vrdma's version, the Go release it was built with and the protocol version its library and daemon speak")
			return nil
		}
		return c.run(append(args[1:len(args):len(args)], "-h"), stdout, stderr)
	}
	return usagef("unknown command %q: the commands are %s", args[0], strings.Join(commandNames(), ", "))
}

// commandNames lists the commands' names.
func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return names
}

// subcommandHelp prints use, a command's usage with its subcommands
// separated by " | ", one subcommand a line, for `vrdma COMMAND -h`.
func subcommandHelp(w io.Writer, use string) {
	fmt.Fprintf(w, "usage: vrdma %s\n", strings.ReplaceAll(use, " | ", "\n       vrdma "))
	fmt.Fprintf(w, "\nvrdma %s SUBCOMMAND -h prints a subcommand's options.\n", strings.Fields(use)[0])
}
