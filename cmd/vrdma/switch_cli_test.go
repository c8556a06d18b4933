package main

import (
	"errors"
	"flag"
	"slices"
	"testing"
)

func TestSwitchParseArgsTakesFlagsAnywhere(t *testing.T) {
	tests := []struct {
		args   []string
		pos    []string
		socket string
		json   bool
	}{
		{nil, nil, "", false},
		{[]string{"a", "b"}, []string{"a", "b"}, "", false},
		{[]string{"--socket", "s", "a", "b"}, []string{"a", "b"}, "s", false},
		{[]string{"a", "--socket=s", "b", "--json"}, []string{"a", "b"}, "s", true},
		{[]string{"a", "b", "-json", "-socket", "s"}, []string{"a", "b"}, "s", true},
		{[]string{"a", "--", "--json", "-x"}, []string{"a", "--json", "-x"}, "", false},
		{[]string{"-", "a"}, []string{"-", "a"}, "", false},
	}
	for _, tt := range tests {
		fs, socket := newFlagSet("test", "test")
		asJSON := fs.Bool("json", false, "")
		pos, err := parseArgs(fs, tt.args)
		if err != nil || !slices.Equal(pos, tt.pos) || *socket != tt.socket || *asJSON != tt.json {
			t.Errorf("parseArgs(%q) = %q, %v, socket %q, json %v; want %q, socket %q, json %v", tt.args, pos, err, *socket, *asJSON, tt.pos, tt.socket, tt.json)
		}
	}
	fs, _ := newFlagSet("test", "test")
	if _, err := parseArgs(fs, []string{"a", "--nope"}); !errors.Is(err, errUsage) {
		t.Errorf("an unknown flag: %v, want a usage error", err)
	}
	if _, err := parseArgs(flag.NewFlagSet("x", flag.ContinueOnError), []string{"--socket"}); !errors.Is(err, errUsage) {
		t.Errorf("an unknown flag: %v, want a usage error", err)
	}
}

func TestSwitchSubcommand(t *testing.T) {
	tests := []struct {
		args []string
		sub  string
		rest []string
	}{
		{nil, "show", nil},
		{[]string{"add", "x"}, "add", []string{"x"}},
		{[]string{"--socket", "s"}, "show", []string{"--socket", "s"}},
		{[]string{"-"}, "-", []string{}},
	}
	for _, tt := range tests {
		sub, rest := subcommand(tt.args, "show")
		if sub != tt.sub || !slices.Equal(rest, tt.rest) {
			t.Errorf("subcommand(%q) = %q, %q; want %q, %q", tt.args, sub, rest, tt.sub, tt.rest)
		}
	}
}
