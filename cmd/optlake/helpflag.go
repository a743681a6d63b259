package main

import (
	"flag"

	"github.com/urfave/cli/v2"
)

// urfave/cli adds its package-level cli.HelpFlag and cli.VersionFlag to
// every app and command, and BoolFlag.Apply writes into the flag it is
// called on (its default value). Two apps parsing at once in one process
// (the in-process CLI of parallel tests; an embedding program) then write
// the same shared flag: a data race. Each Apply here works on a copy.
func init() {
	if f, ok := cli.HelpFlag.(*cli.BoolFlag); ok {
		cli.HelpFlag = &copiedBoolFlag{BoolFlag: *f}
	}
	if f, ok := cli.VersionFlag.(*cli.BoolFlag); ok {
		cli.VersionFlag = &copiedBoolFlag{BoolFlag: *f}
	}
}

// copiedBoolFlag is a BoolFlag whose Apply leaves it unchanged.
type copiedBoolFlag struct{ cli.BoolFlag }

func (f *copiedBoolFlag) Apply(set *flag.FlagSet) error {
	c := f.BoolFlag
	return c.Apply(set)
}
