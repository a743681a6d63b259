package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/optlake/optlake/internal/datadir"
)

// CleanIncomplete removes what writers that died (kill -9) left behind,
// invisible but taking space: the hidden temp files of a local folder
// (datadir.CleanTemp), the incomplete multipart uploads under an S3 prefix.
// Call it only while holding the data directory's lease: an upload of a
// live writer would be aborted too. Returns how many it removed.
//
// GCS and Azure need nothing here: an unfinished GCS resumable upload is
// dropped by the service after a week, Azure discards uncommitted blocks
// after seven days; neither is ever visible as an object.
//
// skip are folders of a local data directory (slash-separated, relative to
// it) the sweep does not enter: compaction's trash.
func CleanIncomplete(ctx context.Context, s Store, skip ...string) (int, error) {
	if dir := LocalDir(s); dir != "" {
		n, err := cleanLocal(dir, time.Now(), skip)
		if err != nil {
			return n, fmt.Errorf("clean up %s: %w", s, err)
		}
		return n, nil
	}
	if b, ok := s.(*Bucket); ok {
		return b.abortUploads(ctx)
	}
	return 0, nil
}

// A local data directory's temp files are looked for in every partition at
// most every fullCleanEvery (the modification time of CleanedMarker in it
// is the last time); the starts in between skip the partitions of days
// before yesterday, which a run does not write. Walking them all at every
// start made a run of the every-5-minutes job slower with every day of
// history: +60 ms a run with 60 days (104,000 files), against a 50 ms run.
// The daily sweep itself enters only the partitions whose folder changed
// since the last one (datadir.Sweep.Unchanged): a stat per partition, not
// a read of the lake's every file name (316,094 after a year). A temp file
// that a replay, catch-up or compaction of an older day left when it
// crashed stays until the next daily sweep: hidden, not *.parquet, so no
// reader sees it.
const (
	fullCleanEvery = 24 * time.Hour
	CleanedMarker  = ".optlake-cleaned"
)

// cleanLocal sweeps root's temp files (CleanIncomplete). The marker also
// lists the folders the daily sweep found holding day folders only (the
// tables, raw/<endpoint>/, _ledger/done/): the starts in between look in
// them for today's and yesterday's folders alone, without reading their
// lists of days (datadir.Sweep.Partitioned). A folder missing from it (a
// new table) is read whole.
func cleanLocal(root string, now time.Time, skip []string) (int, error) {
	marker := filepath.Join(root, CleanedMarker)
	sw := datadir.Sweep{Skip: skip, Now: now}
	if fi, err := os.Stat(marker); err == nil && !fi.ModTime().After(now) {
		if now.Sub(fi.ModTime()) < fullCleanEvery {
			sw.Since = now.Add(-fullCleanEvery) // today's and yesterday's partitions
			if b, err := os.ReadFile(marker); err == nil {
				sw.Partitioned = strings.Fields(string(b))
			}
		} else {
			sw.Unchanged = fi.ModTime()
		}
	}
	rep, err := datadir.CleanTempReport(root, sw)
	if err != nil || !sw.Since.IsZero() {
		return rep.Removed, err
	}
	// A marker that cannot be written only means a full walk next time (a
	// list cut short, that the folders missing from it are read whole).
	var list strings.Builder
	for _, p := range rep.Partitioned {
		list.WriteString(p + "\n")
	}
	if err := os.WriteFile(marker, []byte(list.String()), 0o644); err == nil {
		os.Chtimes(marker, now, now)
	}
	return rep.Removed, nil
}

func (s *Bucket) abortUploads(ctx context.Context) (int, error) {
	var c *s3.Client
	if !s.b.As(&c) {
		return 0, nil // not S3
	}
	n := 0
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(s.bucket)}
	if s.prefix != "" {
		in.Prefix = aws.String(s.prefix)
	}
	for {
		out, err := c.ListMultipartUploads(ctx, in)
		if err != nil {
			return n, fmt.Errorf("clean up incomplete uploads in %s: %w", s, err)
		}
		for _, u := range out.Uploads {
			_, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.bucket), Key: u.Key, UploadId: u.UploadId})
			if err != nil {
				return n, fmt.Errorf("clean up incomplete uploads in %s: abort %s: %w", s, aws.ToString(u.Key), err)
			}
			n++
		}
		if !aws.ToBool(out.IsTruncated) {
			return n, nil
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// s3Client is the bucket's S3 client, for tests and cleanups (nil if the
// store is not S3).
func (s *Bucket) s3Client() *s3.Client {
	var c *s3.Client
	if s.b.As(&c) {
		return c
	}
	return nil
}
