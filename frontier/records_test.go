package frontier

import (
	"bytes"
	"testing"
	"time"
)

func TestRecordRoundTrip(t *testing.T) {
	tests := []record{
		{state: stQueued, qkey: queueKey("a", 7), host: "a", parent: "http://a/"},
		{state: stFetched, depth: 3, attempts: 2, status: 200, pageSeq: 1 << 40, host: "b:8080"},
		{state: stFailed, attempts: 5, status: 503, host: "c", reason: "http-status", detail: "503 é"},
		{state: stExcluded, host: "d", reason: "robots", detail: "Disallow: /"},
	}
	for _, want := range tests {
		got, err := decodeRecord(want.encode())
		if err != nil || got.state != want.state || got.depth != want.depth || got.attempts != want.attempts ||
			got.status != want.status || got.pageSeq != want.pageSeq || !bytes.Equal(got.qkey, want.qkey) ||
			got.host != want.host || got.parent != want.parent || got.reason != want.reason || got.detail != want.detail {
			t.Errorf("decode(encode(%+v)) = %+v, %v", want, got, err)
		}
	}
	c := hostCounts{Queued: 5, Delayed: 1, Fetched: 1 << 30, Failed: 2, Excluded: 3, LastError: "dns: no such host"}
	if got, err := decodeHostCounts(c.encode()); err != nil || got != c {
		t.Errorf("host counts round trip: %+v, %v", got, err)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	nb, host, url, err := parseDelayed(delayedKey(at, 9), delayedValue("h:1", "http://h:1/x"))
	if err != nil || !keyTime(nb).Equal(at) || host != "h:1" || url != "http://h:1/x" {
		t.Errorf("delayed round trip: %v %q %q %v", keyTime(nb), host, url, err)
	}
	for _, tt := range []struct {
		in   time.Time
		want uint64
	}{{time.Time{}, 0}, {time.Unix(-5, 0), 0}, {time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), 1<<63 - 1}} {
		if got := timeKey(tt.in); got != tt.want {
			t.Errorf("timeKey(%v) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// FuzzDecode feeds arbitrary bytes to the decoders of on-disk values: they must return an error
// or a value that encodes back to the same bytes, never panic.
func FuzzDecode(f *testing.F) {
	f.Add((&record{state: stFailed, host: "a", reason: "x", qkey: []byte{1}}).encode())
	f.Add((&hostCounts{Queued: 1, LastError: "e"}).encode())
	f.Add([]byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeRecord(b); err == nil {
			if r2, err := decodeRecord(r.encode()); err != nil || r2.host != r.host || r2.detail != r.detail {
				t.Errorf("record does not round trip: %+v", r)
			}
		}
		if c, err := decodeHostCounts(b); err == nil && b != nil {
			if c2, err := decodeHostCounts(c.encode()); err != nil || c2 != c {
				t.Errorf("host counts do not round trip: %+v", c)
			}
		}
		if len(b) >= 16 {
			parseDelayed(b[:16], b[16:])
		}
	})
}
