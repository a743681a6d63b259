package parquet

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
)

// CountingWriter is the file under arrow-go's Parquet writer: it counts the
// bytes written (the file's size) and keeps the first write error, which
// arrow-go may lose: it panics on some failed writes ("failed to write
// magic number" when the disk is full), see Guard.
type CountingWriter struct {
	W   io.Writer
	N   int64
	Err error // the first write error
}

func (c *CountingWriter) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	c.N += int64(n)
	if err != nil {
		err = DiskFull(err)
		if c.Err == nil {
			c.Err = err
		}
	}
	return n, err
}

// Guard runs fn, one call into arrow-go's Parquet writer over c, and
// returns c's first write error whatever fn returned (nil when c is nil).
// arrow-go v17 loses some write errors and panics on others:
// file.Writer.Close returns nil when the footer could not be written (a
// truncated file would be committed), and starting a file panics when its
// magic number cannot be written ("failed to write magic number", a full
// disk). A panic becomes an error here: it must never leave the process,
// which would exit 2 (the code of a bad flag) and leave its temporary
// files behind.
func Guard(c *CountingWriter, fn func() error) (err error) {
	defer func() {
		r := recover()
		if c != nil && c.Err != nil {
			err = c.Err
		} else if r != nil {
			err = fmt.Errorf("parquet writer: %v", r)
		}
	}()
	return fn()
}

// DiskFull names ENOSPC in err's message (the OS says only "no space left
// on device"), keeping err's chain for errors.Is.
func DiskFull(err error) error {
	if errors.Is(err, syscall.ENOSPC) && !strings.Contains(err.Error(), "ENOSPC") {
		return fmt.Errorf("disk full (ENOSPC): %w", err)
	}
	return err
}
