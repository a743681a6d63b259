package parquet

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/parquet/file"
)

// A compacted partition (optlake compact, package sinks/parquet/compact)
// holds files named CompactedPrefix+"<id>-NNN.parquet" instead of one file
// per snapshot: names new with every compaction (id), so that a reader
// that listed the partition before a compaction swapped it can only open
// files of the listing it made (or fail to find them), never a file of the
// new one. Each carries, in its Parquet key-value metadata under
// ManifestKey, the Manifest: which per-snapshot files' rows it holds.
const (
	CompactedPrefix = "compacted-"
	ManifestKey     = "optlake.compact"
)

// Manifest is the record of a compacted file.
type Manifest struct {
	Version int    `json:"version"`
	ID      string `json:"id"` // one compaction of one partition; every file of it has the same
	Table   string `json:"table"`
	Date    string `json:"date"`
	Part    int    `json:"part"`  // this file's number, 0-based
	Parts   int    `json:"parts"` // files in the partition
	Rows    int64  `json:"rows"`  // rows of every part together
	// Files are the per-snapshot files whose rows the partition holds.
	Files []ManifestFile `json:"files"`
}

// ManifestFile is one per-snapshot file inside a compacted partition, with
// the snapshots its rows belong to: what a later replacement of the file
// replaces.
type ManifestFile struct {
	Name string `json:"name"`
	Rows int64  `json:"rows"`
	// Groups are the distinct snapshot groups of the file's rows:
	// snapshot_time (ms since the epoch), run_id, and endpoint for
	// tables that have that column ("" otherwise).
	Groups []Group `json:"groups"`
}

// Group identifies the rows of one snapshot (of one endpoint) in a table.
type Group struct {
	SnapshotMs int64  `json:"t"`
	RunID      string `json:"run"`
	Endpoint   string `json:"ep,omitempty"`
}

// Has reports whether the manifest lists the per-snapshot file name, or
// another version of the same snapshot's file (SnapshotName).
func (m *Manifest) Has(name string) bool {
	name = SnapshotName(name)
	for _, f := range m.Files {
		if SnapshotName(f.Name) == name {
			return true
		}
	}
	return false
}

// VersionMark separates a snapshot file's name from its version:
// NAME~VERSION.parquet (VersionedName).
const VersionMark = "~"

// VersionedName is version v of the snapshot's file rel (a name or path
// ending in .parquet): NAME~v.parquet. An Iceberg lake writes a snapshot
// loaded again (a replay, a catch-up, a table written twice in a run)
// under a new version instead of rewriting the file its tables reference.
func VersionedName(rel, v string) string {
	return strings.TrimSuffix(rel, ".parquet") + VersionMark + v + ".parquet"
}

// SnapshotName is the name of the snapshot's file that name (a base name)
// is a version of: name without its ~VERSION; name itself when it has
// none.
func SnapshotName(name string) string {
	stem, ok := strings.CutSuffix(name, ".parquet")
	if !ok {
		return name
	}
	if i := strings.LastIndex(stem, VersionMark); i >= 0 {
		return stem[:i] + ".parquet"
	}
	return name
}

// CompactedName is the name of part n of compaction id's partition.
func CompactedName(id string, n int) string {
	return fmt.Sprintf("%s%s-%03d.parquet", CompactedPrefix, id, n)
}

// IsCompacted reports whether a file name is a compacted file's.
func IsCompacted(name string) bool {
	return strings.HasPrefix(name, CompactedPrefix) && strings.HasSuffix(name, ".parquet")
}

// ReadManifest reads the manifest of the compacted file at path.
func ReadManifest(path string) (*Manifest, error) {
	r, err := file.OpenParquetFile(path, false)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer r.Close()
	return ManifestOf(r)
}

// ManifestOf reads the manifest from an open Parquet file.
func ManifestOf(r *file.Reader) (*Manifest, error) {
	v := r.MetaData().KeyValueMetadata().FindValue(ManifestKey)
	if v == nil {
		return nil, fmt.Errorf("no %s metadata", ManifestKey)
	}
	var m Manifest
	if err := json.Unmarshal([]byte(*v), &m); err != nil {
		return nil, fmt.Errorf("%s metadata: %w", ManifestKey, err)
	}
	return &m, nil
}
