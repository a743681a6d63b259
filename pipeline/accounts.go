package pipeline

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/optlake/optlake/pipeline/infer"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// decodeAccount infers the tables of one account endpoint body into every
// sink's writers (load commits them). The registry (DATA/_schema) evolves
// in memory during the decode and is saved once every sink has the rows;
// new columns reach ClickHouse as ALTER TABLE ... ADD COLUMN when the sink
// opens the table.
func (r *Runner) decodeAccount(ctx context.Context, ss []sinks.Sink, c call, body io.Reader) (decoded, error) {
	snap := c.snapshot()
	fan := NewFanout(ctx, ss, snap)
	// Bodies of one endpoint and account in one snapshot (a fanned-out
	// parameter) number their rows on from each other, so keys never
	// collide (rowOffsets by endpoint and account, per table).
	sr := c.sr
	if sr.rowOffsets == nil {
		sr.rowOffsets = map[string]map[string]int64{}
	}
	okey := c.ep.Name + "\x00" + c.rq.account
	offsets := sr.rowOffsets[okey]
	if offsets == nil {
		offsets = map[string]int64{}
		sr.rowOffsets[okey] = offsets
	}
	// Its records (rows and rejects) number on across every account.
	records := sr.rowOffsets[c.ep.Name]
	if records == nil {
		records = map[string]int64{}
		sr.rowOffsets[c.ep.Name] = records
	}
	meta := infer.Meta{Snapshot: snap, Account: c.rq.account, RowOffsets: offsets, RecordOffset: records[schema.Rejects.Name]}
	opt := infer.Options{Mode: r.cfg.SchemaMode, BatchRows: r.cfg.BatchRows, Mem: r.cfg.Mem}
	start := time.Now()
	stats, changes, err := r.cfg.Schemas.Decode(ctx, body, meta, opt, fan.Emit)
	c.res.stage(StageDecode, start)
	if err != nil {
		fan.Abort()
		return decoded{}, fmt.Errorf("infer %s: %w", c.ep.Name, err)
	}
	for _, c := range changes {
		r.log.Info("schema changed", c.LogAttrs()...)
	}
	for t, n := range stats.Overflow {
		r.log.Warn("column budget reached: fields stored in the extra column", "table", t, "fields", n)
		c.res.Overflow += n
	}
	for _, c := range stats.Discarded {
		r.log.Warn("field discarded (--schema-contract discard-columns)", "table", c.Table, "field", c.Field)
	}
	accept := func() error {
		root := stats.Records - stats.Rejects // the endpoint table's rows
		if err := r.rejectCheck(root, stats.Rejects, stats.TopReason, stats.TopRejects); err != nil {
			return err
		}
		for t, n := range stats.Rows {
			c.res.Rows += n
			offsets[t] += n
		}
		c.res.Rejects += stats.Rejects
		records[schema.Rejects.Name] += stats.Records
		return nil
	}
	committed := func(outs map[string]SinkResult) (map[string]SinkResult, error) {
		for _, o := range outs {
			if o.Error != "" {
				return outs, nil // reported per sink; the registry is not saved
			}
		}
		// The rows are committed: their schema is saved even after a SIGTERM.
		if err := r.cfg.Schemas.Save(context.WithoutCancel(ctx)); err != nil {
			return outs, fmt.Errorf("save inferred schema: %w", err)
		}
		if len(changes) > 0 {
			for name, err := range r.writeInferredColumns(ctx, c.sum) {
				o := outs[name]
				if o.Error == "" {
					o.Error = "inferred_columns: " + oneLine(err)
				}
				outs[name] = o
			}
		}
		return outs, nil
	}
	return decoded{fan: fan, accept: accept, committed: committed}, nil
}

// writeInferredColumns records the whole inferred schema (every table and
// column with when it first appeared) in every sink, so SQL users see the
// schema's history next to the data.
func (r *Runner) writeInferredColumns(ctx context.Context, sum *Summary) map[string]error {
	t := schema.InferredColumns
	b := array.NewRecordBuilder(r.cfg.Mem, t.ArrowSchema())
	defer b.Release()
	for _, tb := range r.cfg.Schemas.Tables() {
		for i, c := range r.cfg.Schemas.Columns(tb.Name) {
			typ := c.Type.String()
			if c.List {
				typ = "list<" + typ + ">"
			}
			b.Field(t.MustIndex("table_name")).(*array.StringBuilder).Append(tb.Name)
			b.Field(t.MustIndex("column_name")).(*array.StringBuilder).Append(c.Name)
			b.Field(t.MustIndex("position")).(*array.Int64Builder).Append(int64(i))
			b.Field(t.MustIndex("type")).(*array.StringBuilder).Append(typ)
			b.Field(t.MustIndex("role")).(*array.StringBuilder).Append(c.Role)
			b.Field(t.MustIndex("field")).(*array.StringBuilder).Append(c.Field)
			fs := b.Field(t.MustIndex("first_seen")).(*array.TimestampBuilder)
			if c.FirstSeen.IsZero() {
				fs.AppendNull()
			} else {
				fs.Append(arrow.Timestamp(c.FirstSeen.UnixMilli()))
			}
			b.Field(t.MustIndex("recorded_at")).(*array.TimestampBuilder).Append(arrow.Timestamp(sum.SnapshotTime.UnixMilli()))
		}
	}
	rec := b.NewRecord()
	defer rec.Release()
	return writeAll(ctx, r.cfg.Sinks, t, sinks.Snapshot{Time: sum.SnapshotTime, RunID: sum.RunID, Source: sum.Source, Endpoint: t.Name}, rec)
}
