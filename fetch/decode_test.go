package fetch

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadAll(t *testing.T) {
	body := strings.Repeat("<p>twelve kilobytes of page</p>\n", 400)
	tests := []struct {
		name string
		r    io.Reader
		size int64
		want string
	}{
		{"size known", strings.NewReader(body), int64(len(body)), body},
		{"size unknown", strings.NewReader(body), -1, body},
		{"longer than said", strings.NewReader(body), 100, body},
		{"shorter than said", strings.NewReader("short"), int64(len(body)), "short"},
		{"said more than presized", strings.NewReader(body), 1 << 40, body},
		{"empty", strings.NewReader(""), 0, ""},
		{"one byte at a time", iotest.OneByteReader(strings.NewReader(body)), int64(len(body)), body},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := readAll(tc.r, tc.size)
			if err != nil || string(b) != tc.want {
				t.Errorf("readAll = %d bytes, %v; want %d bytes", len(b), err, len(tc.want))
			}
		})
	}
	b, err := readAll(iotest.TimeoutReader(strings.NewReader(body)), -1)
	if err != iotest.ErrTimeout || len(b) == 0 {
		t.Errorf("readAll of a failing reader = %d bytes, %v; want the first read and ErrTimeout", len(b), err)
	}
}

// TestDecodeBodyOneAllocation: a body of known length without content coding is read into one
// buffer of its size.
func TestDecodeBodyOneAllocation(t *testing.T) {
	body := bytes.Repeat([]byte("<p>twelve kilobytes of page</p>\n"), 400)
	r := bytes.NewReader(body)
	var got []byte
	allocs := testing.AllocsPerRun(20, func() {
		r.Reset(body)
		got, _, _, _ = decodeBody(r, nil, DefaultMaxBody, int64(len(body)))
	})
	if !bytes.Equal(got, body) || cap(got) != len(body)+1 {
		t.Errorf("decodeBody: %d bytes in a buffer of %d, want %d in %d", len(got), cap(got), len(body), len(body)+1)
	}
	if allocs > 3 { // the buffer, the wire reader and the limit
		t.Errorf("decodeBody: %.0f allocations, want at most 3", allocs)
	}
}

// BenchmarkDecodeBody reads a 12 KB body whose length the server said.
func BenchmarkDecodeBody(b *testing.B) {
	body := bytes.Repeat([]byte("<p>twelve kilobytes of page</p>\n"), 400)
	r := bytes.NewReader(body)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r.Reset(body)
		if _, _, _, err := decodeBody(r, nil, DefaultMaxBody, int64(len(body))); err != nil {
			b.Fatal(err)
		}
	}
}
