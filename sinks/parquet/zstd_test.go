package parquet

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// A page's zstd frame (the codec registered for every Parquet writer of
// the process) is a standard frame without zstd's content checksum, which
// any decoder reads back.
func TestPageFrameHasNoChecksum(t *testing.T) {
	codec, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	page := bytes.Repeat([]byte("BTC-27NOV26-95000-C\x00\x01"), 5000)
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	for _, level := range []int{1, 3, compress.DefaultCompressionLevel} {
		frame := codec.EncodeLevel(nil, page, level)
		if len(frame) < 5 || !bytes.Equal(frame[:4], []byte{0x28, 0xb5, 0x2f, 0xfd}) {
			t.Fatalf("level %d: not a zstd frame: % x", level, frame[:min(len(frame), 8)])
		}
		if frame[4]&0x04 != 0 { // Frame_Header_Descriptor: Content_Checksum_flag
			t.Errorf("level %d: the frame carries a content checksum", level)
		}
		got, err := dec.DecodeAll(frame, nil)
		if err != nil || !bytes.Equal(got, page) {
			t.Errorf("level %d: decoded %d bytes (%v), want the page's %d", level, len(got), err, len(page))
		}
	}
}
