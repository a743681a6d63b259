// Command optlake snapshots an options venue's HTTP API into ClickHouse
// and/or a Parquet lake. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/buildinfo"
	"github.com/optlake/optlake/internal/settings"
)

// Exit codes (documented in README).
const (
	exitOK      = 0
	exitFailure = 1 // the run failed
	exitUsage   = 2 // bad flags or configuration
	exitPartial = 3 // some endpoints (or sinks) failed, others loaded
	exitLocked  = 4 // another optlake process holds the data directory
)

// codedError carries an exit code.
type codedError struct {
	code int
	err  error
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }
func (e codedError) ExitCode() int { return e.code }

// version, commit and date are stamped by the release build and the
// Makefile (-ldflags "-X main.version=... -X main.commit=... -X
// main.date=..."); buildinfo.Read completes them from what the Go toolchain
// recorded (go install, go build).
var (
	version = "dev"
	commit  = ""
	date    = ""
)

// buildInfo is this binary's build information (optlake --version, the run
// summary, optlake_build_info).
func buildInfo() buildinfo.Info { return buildinfo.Read(version, commit, date) }

func main() {
	os.Exit(run(host{}, os.Args, os.Stdout, os.Stderr))
}

// host is what one invocation of the CLI takes from its process besides
// its arguments and output: the clock of its snapshot times and the Go
// heap's settings (soft limit, GOGC). The zero host is the process's own
// (time.Now, lowerMemoryLimit, raiseGCPercent). Tests that run the CLI
// in-process, many at once in one test binary, give each invocation its
// own clock and leave the binary's heap settings alone.
type host struct {
	clock    func() time.Time // nil: time.Now
	keepHeap bool             // never change the heap's soft limit or GOGC
}

// now is the time of a snapshot (and the day compaction calls today).
func (h host) now() time.Time {
	if h.clock == nil {
		return time.Now()
	}
	return h.clock()
}

// lowerMemoryLimit is lowerMemoryLimit unless the host keeps its heap's
// settings.
func (h host) lowerMemoryLimit(limit int64) {
	if !h.keepHeap {
		lowerMemoryLimit(limit)
	}
}

// raiseGCPercent is raiseGCPercent unless the host keeps its heap's
// settings.
func (h host) raiseGCPercent() {
	if !h.keepHeap {
		raiseGCPercent()
	}
}

// run executes the CLI and returns the exit code. Only here is anything
// printed about a failure: one line on stderr. A panic that reaches it is
// a failure (exit 1, with its stack after the line), never the runtime's
// exit 2, which means a bad flag.
func run(h host, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "optlake: internal error: %v\n%s", r, debug.Stack())
			code = exitFailure
		}
	}()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	app := newApp(h, stdout, stderr)
	release := holdCLISetup(app)
	defer release() // when no action ran, or one panicked before it started
	err := app.RunContext(ctx, flagsFirst(app, args))
	if err == nil {
		return exitOK
	}
	code = exitFailure
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		code = ec.ExitCode()
	} else if isUsage(err) {
		code = exitUsage
	}
	fmt.Fprintln(stderr, "optlake: "+strings.Join(strings.Fields(namedENOSPC(withFlagHints(err))), " "))
	return code
}

// cliSetup serialises urfave/cli's set-up of a command line. On every
// run it writes to package-level values of its own (its help command's
// separator and help name, HelpFlag's and VersionFlag's defaults), so two
// command lines run at once in one process (the tests run many) would
// race on them. It is the one package-level value here, guarding the
// library's.
var cliSetup sync.Mutex

// holdCLISetup locks cliSetup until the command's action starts (or the
// returned release is called, when no action runs: help, a usage error):
// the set-up is serialised, the commands themselves run at once.
func holdCLISetup(app *cli.App) (release func()) {
	cliSetup.Lock()
	var once sync.Once
	release = func() { once.Do(cliSetup.Unlock) }
	var wrap func(cmds []*cli.Command)
	wrap = func(cmds []*cli.Command) {
		for _, c := range cmds {
			if action := c.Action; action != nil {
				c.Action = func(ctx *cli.Context) error {
					release()
					return action(ctx)
				}
			}
			wrap(c.Subcommands)
		}
	}
	wrap(app.Commands)
	return release
}

// namedENOSPC names ENOSPC where msg says only "no space left on device",
// the OS's text for it: the name is what people search for.
func namedENOSPC(msg string) string {
	if strings.Contains(msg, "ENOSPC") {
		return msg
	}
	return strings.ReplaceAll(msg, syscall.ENOSPC.Error(), syscall.ENOSPC.Error()+" (ENOSPC)")
}

// usageError marks a configuration mistake (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func isUsage(err error) bool {
	var u usageError
	if errors.As(err, &u) {
		return true
	}
	// urfave/cli's own flag errors
	s := err.Error()
	return strings.HasPrefix(s, "flag provided but not defined") || strings.HasPrefix(s, "Required flag") ||
		strings.HasPrefix(s, "invalid value") || strings.Contains(s, "No help topic")
}

func newApp(h host, stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:    "optlake",
		Usage:   "keep the history of an options venue in ClickHouse and Parquet",
		Version: buildInfo().String(),
		Writer:  stdout, ErrWriter: stderr,
		// Errors are printed once, by run.
		ExitErrHandler:       func(*cli.Context, error) {},
		EnableBashCompletion: true,
		// Header values may hold commas; lists are split by the commands.
		DisableSliceFlagSeparator: true,
		Commands: []*cli.Command{
			runCommand(h),
			venueSimCommand(),
			demoCommand(h),
			migrateCommand(),
			replayCommand(h),
			schemaCommand(),
			historyCommand(h),
			configCommand(),
			statusCommand(),
			compactCommand(h),
			lakeCommand(h),
			docsCommand(),
		},
	}
}

// envs names the OPTLAKE_* variable of a flag.
func envs(flag string) []string { return []string{settings.EnvName(flag)} }
