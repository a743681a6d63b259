package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/storage"
)

// `optlake status` reads the load ledger of a data directory on an S3
// bucket prefix (a real versitygw); compact works there too (nothing to
// compact: exit 0); a credential in the URL is refused and never echoed.
func TestStatusOnBucket(t *testing.T) {
	t.Parallel()
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	ctx := context.Background()
	url := g.URL("lake", "hist")
	st, err := storage.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	snap := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	l := ledger.New(st, nil)
	if err := l.Begin(ctx, snap, "run-1", "venue", []string{"instruments"}, []string{"parquet"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, ledger.Key{Time: snap, RunID: "run-1"}, "instruments", map[string]ledger.Outcome{"parquet": {State: ledger.Pending, Error: "bucket away"}}); err != nil {
		t.Fatal(err)
	}
	if s := statusJSON(t, url)["parquet"]; s.Pending != 1 || s.LastError != "bucket away" {
		t.Fatalf("status on the bucket: %+v", s)
	}
	res := optlake(t, "status", "--data-dir", url)
	if res.code != 0 || !strings.Contains(res.stdout, "bucket away") || strings.Contains(res.stdout+res.stderr, testenv.S3SecretKey) {
		t.Fatalf("status text: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = optlake(t, "compact", "--data-dir", url)
	if res.code != 0 || !strings.Contains(res.stdout, "compacted 0 partition(s)") {
		t.Fatalf("compact on a bucket: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	const secret = "sEcReT-in-the-url-123"
	res = optlake(t, "status", "--data-dir", "s3://AKIA:"+secret+"@lake/hist")
	if res.code == 0 || strings.Contains(res.stdout+res.stderr, secret) {
		t.Fatalf("credentials in the URL: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}
