package storage

import "github.com/aws/aws-sdk-go-v2/service/s3"

// S3Client exposes the bucket's S3 client and names to the tests.
func S3Client(s Store) (c *s3.Client, bucket, prefix string) {
	b := s.(*Bucket)
	return b.s3Client(), b.bucket, b.prefix
}
