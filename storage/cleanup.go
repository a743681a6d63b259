package storage

import (
	"context"
	"fmt"

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
func CleanIncomplete(ctx context.Context, s Store) (int, error) {
	switch st := s.(type) {
	case *Local:
		n, err := datadir.CleanTemp(st.Root())
		if err != nil {
			return n, fmt.Errorf("clean up %s: %w", st, err)
		}
		return n, nil
	case *Bucket:
		return st.abortUploads(ctx)
	}
	return 0, nil
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
