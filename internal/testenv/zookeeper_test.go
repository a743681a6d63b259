package testenv_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
)

// A standalone ZooKeeper starts in a temp dir on a free port, serves, and
// stops. (The whole cluster is exercised by sinks/clickhouse/clustertest.)
func TestZooKeeperStartStop(t *testing.T) {
	z, err := testenv.StartZooKeeper(ctx(t), t.TempDir(), nil)
	if err != nil {
		// Missing in CI is a failure; locally a skip.
		if errors.Is(err, testenv.ErrZooKeeperNotInstalled) && os.Getenv("CI") == "" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	defer z.Stop()
	out, err := z.Command(ctx(t), "srvr")
	if err != nil || !strings.Contains(out, "Mode: standalone") {
		t.Fatalf("srvr = %q, %v", out, err)
	}
	if !z.Running() {
		t.Fatal("not running")
	}
	if err := z.Stop(); err != nil {
		t.Fatal(err)
	}
	if z.Running() {
		t.Fatal("still running after Stop")
	}
	if err := z.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}
