package storage

import (
	"errors"

	"golang.org/x/sys/unix"
)

// renameNoReplace moves src to dst in one step unless dst exists
// (renameat2 RENAME_NOREPLACE); errors.ErrUnsupported where the file system
// refuses the flag.
func renameNoReplace(src, dst string) error {
	return renameat2(src, dst, unix.RENAME_NOREPLACE)
}

// exchange swaps a and b in one step (renameat2 RENAME_EXCHANGE);
// errors.ErrUnsupported where the file system refuses the flag.
func exchange(a, b string) error {
	return renameat2(a, b, unix.RENAME_EXCHANGE)
}

func renameat2(from, to string, flags uint) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, flags)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return errors.ErrUnsupported
	}
	return err
}
