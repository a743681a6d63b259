//go:build !linux

package storage

import "errors"

// renameNoReplace and exchange need Linux's renameat2: elsewhere (the
// darwin and windows release builds) Local takes the fallbacks its
// Swapper methods document.
func renameNoReplace(src, dst string) error { return errors.ErrUnsupported }

func exchange(a, b string) error { return errors.ErrUnsupported }
