package storage

import (
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/optlake/optlake/internal/datadir"
)

// S3Client exposes the bucket's S3 client and names to the tests.
func S3Client(s Store) (c *s3.Client, bucket, prefix string) {
	b := s.(*Bucket)
	return b.s3Client(), b.bucket, b.prefix
}

// LocalSyncing is NewLocal(dir) whose folder fsyncs are reported to synced
// (and done).
func LocalSyncing(dir string, synced func(dir string)) *Local {
	l := NewLocal(dir)
	l.sync = func(d string) error { synced(d); return datadir.SyncDir(d) }
	return l
}
