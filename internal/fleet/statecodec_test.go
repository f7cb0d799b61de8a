package fleet

import (
	"bytes"
	"compress/flate"
	"errors"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func TestHostStateRoundTrip(t *testing.T) {
	for _, b := range [][]byte{
		[]byte(`{"aimd":{"version":2,"rate":3.5,"window":4,"baseline":81000000,"parts":{"curve":{"from":2}}},"saved_at":"2026-11-27T16:00:00Z"}`),
		{},
		bytes.Repeat([]byte{0xff, 0, 'x'}, 5000),
	} {
		enc := encodeHostState(b)
		got, err := decodeHostState("a.example", enc)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("decode(encode(%d bytes)) = %d bytes, %v", len(b), len(got), err)
		}
		if len(b) > 100 && len(enc)*2 > len(b) {
			t.Errorf("%d bytes compacted to %d, want at most half", len(b), len(enc))
		}
	}
}

// Stored states of version 1 decode only with its dictionary: changing it needs a version 2.
func TestHostStateDictIsPinned(t *testing.T) {
	if got, want := xxhash.Sum64String(hostStateDict), uint64(0x2c935c3691d568a0); got != want {
		t.Fatalf("hostStateDict hash %#x, want %#x: a changed dictionary is a new encoding version", got, want)
	}
}

func TestHostStateDecodeRefusesDamage(t *testing.T) {
	var bomb bytes.Buffer
	bomb.WriteByte(hostStateV1)
	w, _ := flate.NewWriterDict(&bomb, flate.BestCompression, []byte(hostStateDict))
	w.Write(make([]byte, maxHostState+10))
	w.Close()
	good := encodeHostState([]byte(`{"aimd":{"rate":1}}`))
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "version none"},
		{"JSON of an earlier version", []byte(`{"aimd":{}}`), "version 0x7b"},
		{"truncated", good[:len(good)-3], "unexpected EOF"},
		{"garbage", []byte{hostStateV1, 0xff, 0xff, 0xff}, "flate"},
		{"inflates past the bound", bomb.Bytes(), "more than 65536 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeHostState("a.example", tc.b)
			if !errors.Is(err, errBadHostState) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decodeHostState = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func FuzzDecodeHostState(f *testing.F) {
	f.Add(encodeHostState([]byte(`{"aimd":{"version":2}}`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := decodeHostState("h", b)
		if err == nil && len(out) > maxHostState {
			t.Fatalf("%d bytes inflated", len(out))
		}
	})
}
