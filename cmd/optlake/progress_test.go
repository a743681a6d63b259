package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/pipeline"
)

// On a terminal the replay draws a bar that ends at total/total with the
// last snapshot and its rows, then a newline.
func TestArgsProgressBar(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := progressBar(&buf)
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for i := 1; i <= 3; i++ {
		p(i, 3, &pipeline.Summary{SnapshotTime: t0.Add(time.Duration(i) * time.Minute), Endpoints: []pipeline.EndpointResult{{Rows: int64(10 * i)}}})
	}
	out := buf.String()
	for _, want := range []string{"3/3", "2026-11-24T12:03:00Z 30 rows", "100%"} {
		if !strings.Contains(out, want) {
			t.Errorf("bar lacks %q: %q", want, out)
		}
	}
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("bar does not end its line: %q", out)
	}
}
