package main

import (
	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/settings"
	"github.com/optlake/optlake/pipeline/infer"
	"github.com/optlake/optlake/schema"
)

func schemaCommand() *cli.Command {
	return &cli.Command{
		Name:  "schema",
		Usage: "print the tables: the fixed ones and those inferred from account payloads, with columns, types and when each column first appeared",
		Flags: settings.Flags(settings.Schema),
		Action: func(c *cli.Context) error {
			w := c.App.Writer
			for _, t := range schema.Tables() {
				printTable(w, t)
			}
			st, err := openStore(c.Context, c.String("data-dir"), false)
			if err != nil {
				return err
			}
			defer st.Close()
			reg, err := infer.LoadRegistryFrom(c.Context, st)
			if err != nil {
				return err
			}
			return reg.Print(w)
		},
	}
}

func printTable(w interface{ Write([]byte) (int, error) }, t *schema.Table) {
	line := func(s string) { w.Write([]byte(s + "\n")) }
	line(t.Name + " (" + t.Doc + ")")
	for _, col := range t.Columns {
		typ := col.Type.String()
		if col.List {
			typ = "list<" + typ + ">"
		}
		if col.Nullable {
			typ += " null"
		}
		line("    " + col.Name + "  " + typ)
	}
	line("")
}
