package events

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	const src = "venue.test:8443"

	// No file: the empty state.
	st, err := Load(dir, src)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.LastSnapshot(); ok || st.Len() != 0 || st.Source() != src {
		t.Fatalf("empty state: %v %d %q", ok, st.Len(), st.Source())
	}
	// The empty state round-trips too.
	if err := st.Save(dir); err != nil {
		t.Fatal(err)
	}
	if st2, err := Load(dir, src); err != nil {
		t.Fatal(err)
	} else {
		assertSameState(t, st2, st)
	}

	var rows []row
	for i := 0; i < 5000; i++ {
		r := inst("BTC-"+itoa(int64(i)), "tick_size", float64(i)/7, "is_active", i%3 != 0)
		if i%11 == 0 {
			r["strike"], r["option_type"], r["expiration_time"] = nil, nil, nil
		}
		rows = append(rows, r)
	}
	_, _, st = diff(t, st, src, at(1), rows, 1000, Options{})
	if err := st.Save(dir); err != nil {
		t.Fatal(err)
	}
	path := StatePath(dir, src)
	if filepath.Dir(path) != filepath.Join(dir, "_state", "instrument_events") || filepath.Base(path) != "venue.test%3A8443.state.zst" {
		t.Fatalf("state path %s", path)
	}
	loaded, err := Load(dir, src)
	if err != nil {
		t.Fatal(err)
	}
	assertSameState(t, loaded, st)

	// Saving again replaces the file and leaves no temporary files.
	if err := loaded.Save(dir); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Fatalf("files in state folder: %v", ents)
	}

	// Loaded and in-memory states compare identically.
	next := append(rows[1:4000:4000], inst("NEW"))
	next[0] = inst("BTC-1", "tick_size", 99.0)
	e1, _, _ := diff(t, st, src, at(2), next, 0, Options{})
	e2, _, _ := diff(t, loaded, src, at(2), next, 0, Options{})
	if d := diffStrings(shorts(e2), shorts(e1)); d != "" {
		t.Fatal(d)
	}
	if len(e1) < 1000 {
		t.Fatalf("%d events", len(e1))
	}
}

func TestStatePath(t *testing.T) {
	for src, want := range map[string]string{
		"venue.example.com": "venue.example.com",
		"..":                "%2E.",
		".hidden":           "%2Ehidden",
		"a/b":               "a%2Fb",
		"a%2Fb":             "a%252Fb",
		`c:\x y`:            "c%3A%5Cx%20y",
	} {
		p := StatePath("/data", src)
		if got := strings.TrimSuffix(filepath.Base(p), ".state.zst"); got != want {
			t.Errorf("%q: %s, want %s", src, got, want)
		}
		if filepath.Dir(p) != "/data/_state/instrument_events" {
			t.Errorf("%q escapes: %s", src, p)
		}
	}
	if err := NewState("").Save(t.TempDir()); err == nil {
		t.Error("empty source saved")
	}
	if _, err := Load(t.TempDir(), ""); err == nil {
		t.Error("empty source loaded")
	}
}

// TestCorruptState: every kind of damage is reported as ErrCorruptState.
func TestCorruptState(t *testing.T) {
	dir := t.TempDir()
	const src = "s"
	_, _, st := diff(t, NewState(src), src, at(1), []row{inst("AAAA-name"), inst("BBBB-name"), inst("CCCC-name")}, 0, Options{})
	if err := st.Save(dir); err != nil {
		t.Fatal(err)
	}
	path := StatePath(dir, src)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw := decompress(t, good)

	// raw stream with a valid CRC around altered content
	reseal := func(body []byte) []byte {
		body = bytes.Clone(body)
		crc := crc32Sum(body)
		return compress(t, binary.LittleEndian.AppendUint32(append(body, fileEnd...), crc))
	}
	body := raw[:len(raw)-len(fileEnd)-4]
	nameAt := bytes.Index(body, []byte("AAAA-name")) // preceded by its length, followed by the payload length
	if nameAt <= 0 {
		t.Fatal("layout changed")
	}
	payloadAt := nameAt + len("AAAA-name") + 2 // payload length < 16384: two bytes
	cases := map[string][]byte{
		"empty file":        {},
		"not compressed":    []byte("hello, world"),
		"truncated stream":  good[:len(good)/2],
		"flipped byte":      flip(good, len(good)/2),
		"bad magic":         reseal(append([]byte("X"), body[1:]...)),
		"bad crc":           compress(t, flip(raw, len(raw)-1)),
		"no trailer":        compress(t, body),
		"trailing data":     compress(t, append(bytes.Clone(raw), 0)),
		"other version":     reseal(bytes.Replace(body, []byte(fileMagic+"\x03"), []byte(fileMagic+"\x04"), 1)),
		"version 2 in S2":   reseal(bytes.Replace(body, []byte(fileMagic+"\x03"), []byte(fileMagic+"\x02"), 1)),
		"version 3 in zstd": compressZstd(t, raw),
		"other source":      reseal(bytes.Replace(body, []byte(fileMagic+"\x03\x01s"), []byte(fileMagic+"\x03\x01t"), 1)),
		"not in order":      reseal(bytes.Replace(body, []byte("AAAA-name"), []byte("DDDD-name"), 1)),
		"bad count":         reseal(append(bytes.Clone(body[:len(body)-1]), 4)),
		"bad marker":        reseal(append(bytes.Clone(body[:nameAt-2]), append([]byte{2}, body[nameAt-1:]...)...)),
		"other fields":      reseal(bytes.Replace(body, []byte("tick_size:float64"), []byte("tick_size:string!"), 1)),
		"bad payload":       reseal(append(bytes.Clone(body[:payloadAt]), append([]byte{0x07}, body[payloadAt+1:]...)...)),
		"duplicate name":    reseal(bytes.Replace(body, []byte("BBBB-name"), []byte("AAAA-name"), 1)),
		"huge name length":  reseal(append(bytes.Clone(body[:nameAt-1]), 0xff, 0xff, 0xff, 0x7f)),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir, src)
			if !errors.Is(err, ErrCorruptState) {
				t.Fatalf("err = %v, want ErrCorruptState", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			t.Log(err)
		})
	}
	// The good file still loads (the cases above really were the damage).
	if err := os.WriteFile(path, reseal(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, src); err != nil {
		t.Fatal(err)
	}
}

func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x55
	return b
}

// decompress returns the stream of a state file, zstd or S2.
func decompress(t *testing.T, b []byte) []byte {
	t.Helper()
	if bytes.HasPrefix(b, zstdMagic) {
		zr, err := zstd.NewReader(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		out, err := zr.DecodeAll(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out, err := io.ReadAll(s2.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// compress returns b as an S2 stream (the current state file's codec).
func compress(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := s2.NewWriter(&out)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// compressZstd returns b as a zstd frame (versions 1 and 2).
func compressZstd(t *testing.T, b []byte) []byte {
	t.Helper()
	zw, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Close()
	return zw.EncodeAll(b, nil)
}

func crc32Sum(b []byte) uint32 {
	w := &fileWriter{w: &bytes.Buffer{}}
	w.bytes(b)
	w.flush()
	return w.crc
}
