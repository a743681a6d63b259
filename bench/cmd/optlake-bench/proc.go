package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/optlake/optlake/bench"
)

// procResult is a finished subprocess: wall time from start to exit, its
// peak RSS (ru_maxrss) and its stdout.
type procResult struct {
	Wall    time.Duration
	PeakRSS int64   // bytes
	CPU     float64 // user+sys seconds
	Stdout  []byte
}

// runProc runs cmd to completion. stdin, when not "", is fed from that file;
// stdout is captured unless cmd.Stdout is set. The error carries the tail of
// the process's stderr.
func runProc(ctx context.Context, cmd *exec.Cmd, stdin string) (procResult, error) {
	var stdout bytes.Buffer
	stderr := &tail{max: 8 << 10}
	if cmd.Stdout == nil {
		cmd.Stdout = &stdout
	}
	cmd.Stderr = stderr
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			return procResult{}, err
		}
		defer f.Close()
		cmd.Stdin = f
	}
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	res := procResult{Wall: wall, Stdout: stdout.Bytes()}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			res.PeakRSS = ru.Maxrss * 1024 // KiB on Linux
			res.CPU = tv(ru.Utime) + tv(ru.Stime)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return res, nil
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// measureChild re-execs this binary to run one measurement (see child) and
// returns its results with the child's peak RSS on Main.
func measureChild(ctx context.Context, env []string, mode string, args ...string) (childOut, error) {
	exe, err := os.Executable()
	if err != nil {
		return childOut{}, err
	}
	cmd := exec.CommandContext(ctx, exe, append([]string{childCmd, mode}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	pr, err := runProc(ctx, cmd, "")
	if err != nil {
		return childOut{}, err
	}
	var out childOut
	if err := json.Unmarshal(pr.Stdout, &out); err != nil {
		return childOut{}, fmt.Errorf("%s: bad output %q: %w", mode, pr.Stdout, err)
	}
	out.Main.PeakRSS, out.Main.CPUSeconds = pr.PeakRSS, pr.CPU
	return out, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

var _ io.Writer = (*tail)(nil)

// best returns the fastest of rs (most rows per second) with the highest peak
// RSS seen in any of them (memory is reported conservatively).
func best(rs []bench.Result) bench.Result {
	var b bench.Result
	var rss int64
	for i, r := range rs {
		if i == 0 || r.RowsPerSec() > b.RowsPerSec() {
			b = r
		}
		rss = max(rss, r.PeakRSS)
	}
	b.PeakRSS = rss
	return b
}
