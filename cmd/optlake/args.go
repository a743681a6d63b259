package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// flagsFirst returns args with each command's flags moved ahead of its
// positional arguments, so "optlake history NAME --format json" means the
// same as "optlake history --format json NAME" (urfave/cli v2 stops parsing
// flags at the first positional argument). A value-taking flag keeps the
// word after it; "--" ends the flags and everything after it stays
// positional, in order.
func flagsFirst(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	cmd := findCommand(app.Commands, args[1])
	if cmd == nil {
		return args
	}
	out := append([]string{}, args[:2]...)
	rest := args[2:]
	// A subcommand ("optlake config check ...") parses its own flags.
	for len(rest) > 0 {
		sub := findCommand(cmd.Subcommands, rest[0])
		if sub == nil {
			break
		}
		out = append(out, rest[0])
		cmd, rest = sub, rest[1:]
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		tv := true
		if d, ok := f.(cli.DocGenerationFlag); ok {
			tv = d.TakesValue()
		}
		for _, n := range f.Names() {
			takesValue[n] = tv
		}
	}
	var flags, positional []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			positional = append(positional, rest[i:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if takesValue[name] && i+1 < len(rest) {
			i++
			flags = append(flags, rest[i])
		}
	}
	return append(append(out, flags...), positional...)
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
