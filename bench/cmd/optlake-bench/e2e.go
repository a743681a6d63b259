package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/optlake/optlake/bench"
)

// e2e measures `optlake run --endpoints instruments` end to end against an
// HTTP server in the bench process that sends the listing file DuckDB reads
// (sendfile, no gzip: what serving costs is the kernel's copy, not a core of
// the two the run and DuckDB are measured on): a first snapshot into an
// empty data directory (each run), then next snapshots into the directory
// the last first one left (with its instrument_events state; the listing is
// the same, so the comparison finds no change). Wall time is the run
// process's, from exec to exit; peak RSS is its ru_maxrss.
func (b *benchRun) e2e(ctx context.Context, bin string, l Listing) error {
	addr, stop, err := serveListing(l.Path)
	if err != nil {
		return err
	}
	defer stop()
	dataDir := filepath.Join(b.work, "e2e-data")
	if b.cfg.keep == "" {
		defer os.RemoveAll(dataDir)
	}
	for _, pass := range []string{"e2e_first", "e2e_second"} {
		m := b.rep.add(pass, l.Label, "optlake")
		for i := range b.cfg.runs {
			if pass == "e2e_first" {
				os.RemoveAll(dataDir) // a first snapshot every time
			}
			r, err := b.runOptlake(ctx, bin, "e2e", b.profilePath(pass, l.Label, i), int64(l.Instruments),
				"--api-url", "http://"+addr, "--data-dir", dataDir)
			if err != nil {
				return err
			}
			if r.InBytes != l.Bytes {
				return fmt.Errorf("optlake run read a body of %d bytes, the listing file is %d", r.InBytes, l.Bytes)
			}
			m.Runs = append(m.Runs, r)
			b.progress("optlake run (%s snapshot) %s run %d: %s, CPU %.2fs, peak RSS %s", strings.TrimPrefix(pass, "e2e_"), l.Label, i+1, rate(r), r.CPUSeconds, mib(r.PeakRSS))
		}
		m.finish()
	}
	return nil
}

// runOptlake runs `optlake run --endpoints instruments --source venue-sim`
// with args once (with a CPU profile into profile when the bench writes
// them), and returns the measurement: the run summary's instruments
// endpoint, the process's wall time, CPU and peak RSS. A run that did not
// load want rows is an error. name names the summary file in the work
// folder.
func (b *benchRun) runOptlake(ctx context.Context, bin, name, profile string, want int64, args ...string) (bench.Result, error) {
	sum := filepath.Join(b.work, name+"-summary.json")
	args = append([]string{"run"}, args...)
	args = append(args, "--endpoints", "instruments", "--source", "venue-sim", "--summary-json", sum, "--log-level", "warn")
	if b.cfg.profile != "" && b.runProfiles {
		args = append(args, "--cpuprofile", profile)
	}
	pr, err := runProc(ctx, exec.CommandContext(ctx, bin, args...), "")
	if err != nil {
		return bench.Result{}, err
	}
	r, err := readSummary(sum)
	if err != nil {
		return bench.Result{}, err
	}
	r.Seconds, r.PeakRSS, r.CPUSeconds = pr.Wall.Seconds(), pr.PeakRSS, pr.CPU
	if r.Rows != want {
		return bench.Result{}, fmt.Errorf("optlake run (%s) loaded %d rows, want %d", name, r.Rows, want)
	}
	return r, nil
}

// readSummary reads the instruments endpoint of a run summary.
func readSummary(path string) (bench.Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return bench.Result{}, err
	}
	var s struct {
		OK        bool   `json:"ok"`
		Error     string `json:"error"`
		Endpoints []struct {
			Endpoint string `json:"endpoint"`
			Rows     int64  `json:"rows"`
			Rejects  int64  `json:"rejects"`
			Bytes    int64  `json:"bytes"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return bench.Result{}, fmt.Errorf("run summary: %w", err)
	}
	if !s.OK {
		return bench.Result{}, fmt.Errorf("run failed: %s", s.Error)
	}
	for _, e := range s.Endpoints {
		if e.Endpoint == "instruments" {
			return bench.Result{Rows: e.Rows, Rejects: e.Rejects, InBytes: e.Bytes}, nil
		}
	}
	return bench.Result{}, errors.New("run summary has no instruments endpoint")
}

// serveListing serves the file at path as GET /v1/public/get_instruments on
// a free loopback port (http.ServeContent: sendfile, Content-Length, no
// compression) and returns the address and a function that stops it.
func serveListing(path string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/public/get_instruments" {
			http.NotFound(w, r)
			return
		}
		f, err := os.Open(path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		http.ServeContent(w, r, "", fi.ModTime(), f)
	})}
	go srv.Serve(ln)
	return ln.Addr().String(), func() { srv.Close() }, nil
}

// startSim starts `optlake venue-sim` (seed bench.Seed) on a free port with
// the extra flags and returns its address and a function that stops it.
func startSim(ctx context.Context, bin string, extra ...string) (string, func(), error) {
	args := append([]string{"venue-sim", "--addr", "127.0.0.1:0", "--seed", strconv.Itoa(bench.Seed)}, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	errTail := &tail{max: 4 << 10}
	cmd.Stderr = errTail
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "listening on http://"); ok {
				addrc <- strings.Fields(rest)[0]
				break
			}
		}
		io.Copy(io.Discard, stdout) // keep draining
	}()
	select {
	case addr := <-addrc:
		return addr, stop, nil
	case <-time.After(60 * time.Second):
		stop()
		return "", nil, fmt.Errorf("venue-sim did not start: %s", errTail.String())
	case <-ctx.Done():
		stop()
		return "", nil, ctx.Err()
	}
}
