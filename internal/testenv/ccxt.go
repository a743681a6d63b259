package testenv

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// CCXT is an independent signer: the ccxt library's own sign() of each
// venue (tools/ccxt/sign.mjs, run by node for the test's lifetime). Tests
// that check a venue profile's signatures ask it what the venue's request
// must look like instead of trusting code of this project.
type CCXT struct {
	mu  sync.Mutex
	in  io.WriteCloser
	out *bufio.Reader
}

// NewCCXT starts the oracle. When node or the ccxt module (scripts/deps.sh
// installs it) is missing, the test is skipped locally and fails in CI.
func NewCCXT(t testing.TB) *CCXT {
	t.Helper()
	node, script, err := nodeScript("ccxt", "sign.mjs", "ccxt/package.json")
	if err != nil {
		unavailable(t, "%v: run `make deps`", err)
		return nil
	}
	cmd := exec.Command(node, script)
	cmd.Dir = filepath.Dir(script)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the ccxt oracle: %v", err)
	}
	t.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Logf("ccxt oracle: %v", err)
		}
	})
	return &CCXT{in: in, out: bufio.NewReader(out)}
}

// Call sends req (marshalled to one JSON line) and decodes the answer into
// answer; an answer {"error": …} is an error.
func (c *CCXT) Call(req, answer any) error {
	line, err := json.Marshal(req)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.in.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("ccxt oracle: %w", err)
	}
	resp, err := c.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("ccxt oracle: %w", err)
	}
	var e struct{ Error string }
	if err := json.Unmarshal(resp, &e); err != nil {
		return fmt.Errorf("ccxt oracle: %w", err)
	}
	if e.Error != "" {
		return errors.New("ccxt: " + e.Error)
	}
	return json.Unmarshal(resp, answer)
}
