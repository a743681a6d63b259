package main

import (
	"github.com/optlake/optlake/internal/metrics"
	"github.com/optlake/optlake/pipeline"
)

// metricsRun is what internal/metrics records of a run summary (metrics
// does not import the pipeline).
func metricsRun(sum *pipeline.Summary) *metrics.Run {
	if sum == nil {
		return nil
	}
	r := &metrics.Run{SnapshotTime: sum.SnapshotTime, DurationMS: sum.DurationMS, OK: sum.OK, Error: sum.Error}
	for _, e := range sum.Endpoints {
		er := metrics.EndpointRun{Endpoint: e.Endpoint, Status: e.Status, Requests: e.Requests, Rows: e.Rows, Rejects: e.Rejects, Duplicates: e.Duplicates,
			Events: e.Events, EventsSkipped: e.EventsSkipped, Overflow: e.Overflow, Bytes: e.Bytes, DurationMS: e.DurationMS, Error: e.Error,
			Sinks: make(map[string]metrics.SinkRun, len(e.Sinks))}
		for name, s := range e.Sinks {
			er.Sinks[name] = metrics.SinkRun{Rows: s.Rows, Rejects: s.Rejects, Bytes: s.Bytes, Error: s.Error}
		}
		r.Endpoints = append(r.Endpoints, er)
	}
	for _, p := range sum.Pending {
		r.Pending = append(r.Pending, metrics.Pending{Sink: p.Sink, Pending: p.Pending, Oldest: p.Oldest})
	}
	if sum.CatchUp != nil {
		for _, s := range sum.CatchUp.Snapshots {
			r.CaughtUp = append(r.CaughtUp, metrics.CaughtUp{OK: s.OK, Sinks: s.Sinks})
		}
	}
	return r
}
