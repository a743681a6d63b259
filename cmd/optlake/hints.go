package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/sinks/clickhouse"
)

// Libraries say what is wrong and what fixes it; only the CLI knows its
// flags. flagHints pairs a remedy a library states with the flag that
// applies it: the one-line reason of a failed command gets the flag right
// after the remedy (the error may have travelled as text, in a run's
// summary, so the remedy is found in the message).
var flagHints = []struct{ remedy, flag string }{
	{clickhouse.MigrateRemedy, "(or pass --migrate)"},
	{clickhouse.ClusterRemedy, "(--cluster)"},
	{clickhouse.NoClusterRemedy, "(leave out --cluster)"},
}

// withFlagHints is err's message with the flags that fix it.
func withFlagHints(err error) string {
	msg := err.Error()
	var ca *extract.CAFileError
	var pe *pipeline.ParamError
	var mp *pipeline.MissingParamError
	switch {
	case errors.Is(err, clickhouse.ErrNoDSN):
		msg += " (--clickhouse-dsn or OPTLAKE_CLICKHOUSE_DSN)"
	case errors.As(err, &ca):
		msg = strings.Replace(msg, "CA file ", "--ca-file ", 1)
	case errors.As(err, &pe):
		msg = strings.Replace(msg, pe.Error(), fmt.Sprintf("--param %q: want endpoint.key=value", pe.Spec), 1)
	case errors.As(err, &mp):
		msg = strings.Replace(msg, mp.Error(), fmt.Sprintf("endpoint %s needs --param %s.%s=VALUE", mp.Endpoint, mp.Endpoint, mp.Key), 1)
	}
	for _, h := range flagHints {
		msg = strings.ReplaceAll(msg, h.remedy, h.remedy+" "+h.flag)
	}
	return msg
}
