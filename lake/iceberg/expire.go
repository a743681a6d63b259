package iceberg

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	iceio "github.com/optlake/optlake/third_party/iceberg-go/io"
	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"
)

// ExpireReport is what Expire did to one table.
type ExpireReport struct {
	Table        string
	Expired      int   // snapshots removed from the metadata
	Kept         int   // snapshots left
	Deleted      int   // files deleted: referenced by no snapshot left
	DeletedBytes int64 // their size
}

// Expire is the lake's upkeep, table by table (tables nil: every table):
//
//  1. Snapshots older than keep are removed from the metadata, in one
//     commit (iceberg-go's ExpireSnapshots); the current one always stays.
//     Time travel reaches back keep, no further.
//  2. Files under the table's folder that no snapshot left references —
//     data files only expired snapshots held, their manifests and
//     manifest lists, metadata versions past the metadata log, files a
//     crash left before their commit (a compaction's, an append's) — are
//     deleted once they are older than grace (iceberg-go's
//     DeleteOrphanFiles). A referenced file is never deleted, however old;
//     the grace keeps a file written for a commit still to come.
//
// It runs under the data directory's lock (no commit is under way).
func (l *Warehouse) Expire(ctx context.Context, tables []string, keep, grace time.Duration) ([]ExpireReport, error) {
	if keep < 0 || grace < 0 {
		return nil, fmt.Errorf("iceberg expire: negative retention (keep %s, grace %s)", keep, grace)
	}
	if tables == nil {
		var err error
		if tables, err = l.tableNames(ctx); err != nil {
			return nil, fmt.Errorf("iceberg expire: %w", err)
		}
	}
	var out []ExpireReport
	for _, name := range tables {
		rep, err := l.expire(ctx, name, keep, grace)
		if err != nil {
			return out, fmt.Errorf("iceberg expire %s: %w", name, err)
		}
		if rep.Expired > 0 || rep.Deleted > 0 {
			l.log.Info("iceberg table expired", "table", name, "snapshots_expired", rep.Expired,
				"snapshots_kept", rep.Kept, "files_deleted", rep.Deleted, "bytes_deleted", rep.DeletedBytes)
		}
		out = append(out, rep)
	}
	return out, nil
}

func (l *Warehouse) expire(ctx context.Context, name string, keep, grace time.Duration) (ExpireReport, error) {
	rep := ExpireReport{Table: name}
	tbl, ok, err := l.Table(ctx, name)
	if err == nil && ok && l.cat.movedFrom(name) != "" {
		if err = l.writable(ctx, name); err == nil {
			tbl, ok, err = l.Table(ctx, name)
		}
	}
	if err != nil || !ok {
		return rep, err
	}
	before := len(tbl.Metadata().Snapshots())
	rep.Kept = before
	if before > 1 {
		tx := tbl.NewTransaction()
		// The files go in step 2, after the grace: not right after the
		// commit, under a reader still planning on an expired snapshot.
		err := tx.ExpireSnapshots(icetable.WithOlderThan(keep), icetable.WithRetainLast(1), icetable.WithPostCommit(false))
		if err != nil {
			return rep, err
		}
		staged, err := tx.StagedTable()
		if err != nil {
			return rep, err
		}
		if n := len(staged.Metadata().Snapshots()); n < before {
			if tbl, err = tx.Commit(ctx); err != nil {
				return rep, fmt.Errorf("commit: %w", err)
			}
			rep.Expired, rep.Kept = before-n, n
		}
	}
	res, err := tbl.DeleteOrphanFiles(ctx, icetable.WithFilesOlderThan(grace))
	if err != nil {
		return rep, fmt.Errorf("delete unreferenced files: %w", err)
	}
	rep.Deleted, rep.DeletedBytes = len(res.DeletedFiles), res.TotalSizeBytes
	return rep, nil
}

// tableNames lists the lake's Iceberg tables: the folders of the data
// directory that hold a vN.metadata.json, or that the catalog holds.
func (l *Warehouse) tableNames(ctx context.Context) ([]string, error) {
	if l.cat.remote == nil {
		if err := l.cat.unbound(ctx); err != nil {
			return nil, err
		}
	}
	top, err := l.cat.st.ListDir(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, in := range top {
		name, ok := strings.CutSuffix(in.Name, "/")
		if !ok || name == "" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "raw" {
			continue
		}
		v, err := l.cat.currentVersion(ctx, name)
		if err != nil {
			return nil, err
		}
		if v == 0 && l.cat.remote != nil {
			// In a catalog, the vN files may have gone with the upkeep
			// (past the metadata log): the catalog knows the table.
			if v, err = l.cat.remote.has(ctx, name); err != nil {
				return nil, err
			}
		}
		if v > 0 {
			out = append(out, name)
		}
	}
	return out, nil
}

var _ iceio.ListableIO = (*storeIO)(nil)

// WalkDir implements iceio.ListableIO (what DeleteOrphanFiles lists a
// table's folder with): every object under root, with its modification
// time, which the grace period is measured against. Folders are not
// walked one by one: a store lists a prefix in one go.
func (s *storeIO) WalkDir(root string, fn fs.WalkDirFunc) error {
	name, err := s.name(root)
	if err != nil {
		return fn(root, nil, err)
	}
	infos, err := s.st.List(s.ctx, strings.TrimSuffix(name, "/")+"/")
	if err != nil {
		return fn(root, nil, err)
	}
	for _, in := range infos {
		e := walkEntry{name: in.Name, size: in.Size, mod: in.ModTime}
		if err := fn(s.location(in.Name), e, nil); err != nil {
			return err
		}
	}
	return nil
}

// walkEntry is a listed object as an fs.DirEntry and fs.FileInfo.
type walkEntry struct {
	name string
	size int64
	mod  time.Time
}

func (e walkEntry) Name() string               { return path.Base(e.name) }
func (e walkEntry) IsDir() bool                { return false }
func (e walkEntry) Type() fs.FileMode          { return 0 }
func (e walkEntry) Info() (fs.FileInfo, error) { return e, nil }
func (e walkEntry) Size() int64                { return e.size }
func (e walkEntry) Mode() fs.FileMode          { return 0o444 }
func (e walkEntry) ModTime() time.Time         { return e.mod }
func (e walkEntry) Sys() any                   { return nil }
