package archive

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// listingBody is n bytes of listing-like JSON with random numbers, so that
// the body spans many zstd blocks and windows.
func listingBody(n int) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	var b bytes.Buffer
	b.WriteString(`[{"instruments":[`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"instrument_name":"BTC-27DEC26-`)
		b.WriteString(strings.Repeat("1", 1+r.IntN(6)))
		b.WriteString(`-C","strike":`)
		b.WriteString(string(rune('1' + r.IntN(9))))
		b.WriteString(`,"index_price":"9`)
		for range 6 {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		b.WriteString(`"}`)
	}
	b.WriteString(`]}]`)
	return b.Bytes()
}

// An archived body is one standard zstd frame: its header asks for the
// content checksum and a window every decoder must support (≤ 8 MiB), and
// the zstd CLI decodes it back to the body and checks the checksum.
func TestStandardFrame(t *testing.T) {
	dir := t.TempDir()
	a := New(dir)
	body := listingBody(3 << 20) // many 128 KiB blocks, past the window
	m := put(t, a, Meta{Endpoint: "instruments", SnapshotTime: t0, RunID: "run-1", Attempt: 1}, body, 200, true)
	file := filepath.Join(dir, m.File)
	obj, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(obj) < 6 || binary.LittleEndian.Uint32(obj) != 0xFD2FB528 {
		t.Fatalf("not a zstd frame: % x", obj[:min(len(obj), 8)])
	}
	fhd := obj[4]
	if fhd&0x04 == 0 {
		t.Fatalf("frame header %08b: no content checksum", fhd)
	}
	if fhd&0x20 == 0 { // not single-segment: a window descriptor follows
		wd := obj[5]
		window := (uint64(1) << (10 + wd>>3))
		window += (window / 8) * uint64(wd&7)
		if window > 8<<20 {
			t.Errorf("window %d bytes, want at most 8 MiB", window)
		}
	}

	zstdCLI, err := exec.LookPath("zstd")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("the zstd CLI is not installed")
		}
		t.Skip("the zstd CLI is not installed")
	}
	out, err := exec.Command(zstdCLI, "-d", "-c", file).Output()
	if err != nil {
		t.Fatalf("zstd -d: %v", err)
	}
	if !bytes.Equal(out, body) {
		t.Fatalf("zstd -d gave %d bytes, archived %d", len(out), len(body))
	}
	info, err := exec.Command(zstdCLI, "-lv", file).CombinedOutput()
	if err != nil || !strings.Contains(string(info), "XXH64") {
		t.Errorf("zstd -lv: %v\n%s", err, info)
	}
	// The checksum is checked: a flipped bit of it fails the CLI's test.
	obj[len(obj)-1] ^= 1
	bad := filepath.Join(t.TempDir(), "bad.json.zst")
	if err := os.WriteFile(bad, obj, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(zstdCLI, "-t", bad).CombinedOutput(); err == nil {
		t.Errorf("zstd -t accepted a wrong checksum: %s", out)
	}
}
