package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestLinkOrCopyBoundsLinks: a body linked more often than maxLinks (a
// year's 105,120 listings) is copied, and no file gets more than maxLinks
// links, leaving room for the hard-linked copies of a lake (ext4 refuses
// a link past 65,000: "too many links").
func TestLinkOrCopyBoundsLinks(t *testing.T) {
	dir := t.TempDir()
	body := filepath.Join(dir, "body")
	want := []byte("a listing body")
	if err := os.WriteFile(body, want, 0o644); err != nil {
		t.Fatal(err)
	}
	src := body
	n := maxLinks + maxLinks/2
	for i := range n {
		if err := linkOrCopy(&src, filepath.Join(dir, fmt.Sprint(i))); err != nil {
			t.Fatalf("link %d: %v", i, err)
		}
	}
	if src == body {
		t.Fatalf("%d links of one body: never copied", n)
	}
	for _, name := range []string{body, src, filepath.Join(dir, fmt.Sprint(n-1))} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if links := fi.Sys().(*syscall.Stat_t).Nlink; links > maxLinks {
			t.Errorf("%s has %d links, more than %d", name, links, maxLinks)
		}
		if b, err := os.ReadFile(name); err != nil || !bytes.Equal(b, want) {
			t.Errorf("%s holds %q (%v), want the body", name, b, err)
		}
	}
}
