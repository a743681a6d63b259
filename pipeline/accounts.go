package pipeline

import (
	"context"
	"fmt"
	"io"

	"github.com/optlake/optlake/pipeline/infer"
	"github.com/optlake/optlake/sinks"
)

// loadAccount infers the tables of one account endpoint body and loads them
// into every sink. The registry (DATA/_schema) evolves in memory during the
// decode and is saved once every sink has the rows; new columns reach
// ClickHouse as ALTER TABLE ... ADD COLUMN when the sink opens the table.
func (r *Runner) loadAccount(ctx context.Context, ep Endpoint, part string, rq requestSpec, body io.Reader, sum *Summary, res *EndpointResult, sr *snapshotRun) (map[string]SinkResult, error) {
	snap := sinks.Snapshot{Time: sum.SnapshotTime, RunID: sum.RunID, Source: sum.Source, Endpoint: ep.Name, Part: part}
	fan := newFanout(ctx, r.cfg.Sinks, snap)
	// Bodies of one endpoint and account in one snapshot (a fanned-out
	// parameter) number their rows on from each other, so keys never collide.
	if sr.rowOffsets == nil {
		sr.rowOffsets = map[string]map[string]int64{}
	}
	okey := ep.Name + "\x00" + rq.account
	offsets := sr.rowOffsets[okey]
	if offsets == nil {
		offsets = map[string]int64{}
		sr.rowOffsets[okey] = offsets
	}
	meta := infer.Meta{SnapshotTime: sum.SnapshotTime, RunID: sum.RunID, Source: sum.Source, Account: rq.account, Endpoint: ep.Name, RowOffsets: offsets}
	opt := infer.Options{Mode: r.cfg.SchemaMode, BatchRows: r.cfg.BatchRows, Mem: r.cfg.Mem}
	stats, changes, err := r.cfg.Schemas.Decode(ctx, body, meta, opt, fan.emit)
	if err != nil {
		fan.abort()
		return nil, fmt.Errorf("infer %s: %w", ep.Name, err)
	}
	for _, c := range changes {
		r.log.Info("schema changed", "table", c.Table, "column", c.Column, "type", c.Type.String(), "list", c.List, "change", c.Kind, "field", c.Field)
	}
	for _, c := range stats.Discarded {
		r.log.Warn("field discarded (--schema-contract discard-columns)", "table", c.Table, "field", c.Field)
	}
	for t, n := range stats.Rows {
		res.Rows += n
		offsets[t] += n
	}
	outs := fan.commit(ctx)
	for _, o := range outs {
		if o.Error != "" {
			return outs, nil // reported per sink; the registry is not saved
		}
	}
	if err := r.cfg.Schemas.Save(); err != nil {
		return outs, fmt.Errorf("save inferred schema: %w", err)
	}
	return outs, nil
}
