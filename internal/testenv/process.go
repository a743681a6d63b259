package testenv

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// process supervises one server process of a test (clickhouse-server,
// ZooKeeper, versitygw): started in a process group of its own that dies
// with the test binary (Pdeathsig), waited for in the background,
// signalled as a group. The zero value has no process.
type process struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

// start starts cmd (whose Dir, Env, output and SysProcAttr.Credential the
// caller set); onExit, when
// set, runs once it has exited. It returns the channel closed then.
func (p *process) start(cmd *exec.Cmd, onExit func()) (<-chan struct{}, error) {
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if cmd.SysProcAttr != nil {
		// The user to run as (Go sets the death signal after it).
		attr.Credential = cmd.SysProcAttr.Credential
	}
	cmd.SysProcAttr = attr
	if err := startOnLockedThread(cmd); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		if onExit != nil {
			onExit()
		}
		close(exited)
	}()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	return exited, nil
}

func (p *process) state() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.exited
}

// done is closed when the process has exited (nil: never started).
func (p *process) done() <-chan struct{} {
	_, exited := p.state()
	return exited
}

func (p *process) pid() int {
	cmd, _ := p.state()
	if cmd == nil {
		return 0
	}
	return cmd.Process.Pid
}

// running reports whether the process is alive.
func (p *process) running() bool {
	_, exited := p.state()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// terminate sends sig to the process group, waits for the exit, and after
// timeout kills the group with SIGKILL (then an error says so, unless sig
// was SIGKILL). A process not running is a no-op.
func (p *process) terminate(sig syscall.Signal, timeout time.Duration) error {
	cmd, exited := p.state()
	if cmd == nil {
		return nil
	}
	select {
	case <-exited:
		return nil
	default:
	}
	what, pid := filepath.Base(cmd.Path), cmd.Process.Pid
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signalling %s (pid %d): %w", what, pid, err)
	}
	select {
	case <-exited:
		return nil
	case <-time.After(timeout):
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s (pid %d): %w", what, pid, err)
	}
	<-exited
	if sig != syscall.SIGKILL {
		return fmt.Errorf("%s (pid %d) did not stop within %s of %s; killed", what, pid, timeout, sig)
	}
	return nil
}

// spawn requests go to one goroutine locked to its OS thread for the life of
// the process. Pdeathsig fires when the *thread* that started the child exits,
// and the Go runtime may retire threads; this one never is.
type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

var (
	spawnOnce sync.Once
	spawnCh   = make(chan spawnReq)
)

func startOnLockedThread(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range spawnCh {
				r.err <- r.cmd.Start()
			}
		}()
	})
	req := spawnReq{cmd: cmd, err: make(chan error, 1)}
	spawnCh <- req
	return <-req.err
}
