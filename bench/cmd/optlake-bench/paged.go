package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/optlake/optlake/venuesim"
)

// pagedPages is how many pages the paged listing is served in.
const pagedPages = 100

// paged measures `optlake run --endpoints instruments` against `optlake
// venue-sim` serving the largest listing in 100 pages chained by Link
// headers (frozen tick: every page is of the same listing). Pages are
// decoded as they arrive and staged until the last, so peak RSS must stay
// that of a one-page run (issue 31). Only the run process is measured; the
// simulator builds the listing once (its first page) and slices it.
func (b *benchRun) paged(ctx context.Context, bin string) error {
	n := b.cfg.sizes[len(b.cfg.sizes)-1]
	label := fmt.Sprintf("%s/%d pages", sizeLabel(n), pagedPages)
	addr, stop, err := startSim(ctx, bin, "--instruments", strconv.Itoa(n), "--tick", "0",
		"--paginate", venuesim.PageLink, "--page-size", strconv.Itoa((n+pagedPages-1)/pagedPages))
	if err != nil {
		return err
	}
	defer stop()
	dataDir := filepath.Join(b.work, "paged-data")
	if b.cfg.keep == "" {
		defer os.RemoveAll(dataDir)
	}
	cfgPath := filepath.Join(b.work, "paged.yaml")
	if err := os.WriteFile(cfgPath, []byte("endpoints:\n  instruments:\n    pagination: {type: link_header}\n"), 0o600); err != nil {
		return err
	}
	m := b.rep.add("e2e_paged", label, "optlake")
	for i := range b.cfg.runs {
		os.RemoveAll(dataDir) // a first snapshot every time
		r, err := b.runOptlake(ctx, bin, "paged", b.profilePath("e2e_paged", label, i), int64(n),
			"--config", cfgPath, "--api-url", "http://"+addr, "--data-dir", dataDir)
		if err != nil {
			return err
		}
		m.Runs = append(m.Runs, r)
		b.progress("optlake run (listing in %d pages) %s run %d: %s, CPU %.2fs, peak RSS %s", pagedPages, label, i+1, rate(r), r.CPUSeconds, mib(r.PeakRSS))
	}
	m.finish()
	return nil
}
