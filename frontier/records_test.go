package frontier

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

func TestRecordRoundTrip(t *testing.T) {
	tests := []record{
		{state: stQueued, qkey: queueKey("a", 7), host: "a", parent: "http://a/"},
		{state: stFetched, depth: 3, attempts: 2, status: 200, pageSeq: 1 << 40, host: "b:8080"},
		{state: stFailed, attempts: 5, status: 503, host: "c", reason: "http-status", detail: "503 é"},
		{state: stExcluded, host: "d", reason: "robots", detail: "Disallow: /"},
		{state: stQueued, qkey: queueKey("e", 1), host: "e", parent: "http://e/", role: RoleRequisite},
	}
	for _, want := range tests {
		b := want.encode()
		if wantV := map[Role]byte{RolePage: recordVersion, RoleRequisite: recordVersion3}[want.role]; b[0] != wantV {
			t.Errorf("%+v encoded as version %d, want %d", want, b[0], wantV)
		}
		got, err := decodeRecord(b)
		if err != nil || got.role != want.role || got.state != want.state || got.depth != want.depth || got.attempts != want.attempts ||
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
	f.Add((&record{state: stQueued, host: "a", qkey: queueKey("a", 1), role: RoleRequisite}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeRecord(b); err == nil {
			if r2, err := decodeRecord(r.encode()); err != nil || r2.host != r.host || r2.detail != r.detail || r2.role != r.role {
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

// encodeV1 is the record encoding of format 1, as stores written before format 2 hold it.
func encodeV1(r *record) []byte {
	b := []byte{recordVersion1, r.state}
	for _, n := range []uint64{uint64(r.depth), uint64(r.attempts), uint64(r.status), r.pageSeq, uint64(r.hops)} {
		b = binary.AppendUvarint(b, n)
	}
	for _, s := range [][]byte{r.qkey, []byte(r.host), []byte(r.parent), []byte(r.reason), []byte(r.detail)} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// TestRecordFormats checks that records of both versions decode alike, that version 2 leaves
// a parent's host prefix and a queue key's host out, and that queue values round trip.
func TestRecordFormats(t *testing.T) {
	tests := []record{
		{state: stQueued, qkey: queueKey("a.com", 0), host: "a.com", parent: "https://a.com/x?y"},
		{state: stQueued, qkey: queueKey("a.com", 1<<50), host: "a.com", parent: "http://a.com/", hops: 2},
		{state: stQueued, qkey: delayedKey(time.Unix(1e9, 5), 3), host: "a.com", parent: "http://b.com/"},
		{state: stQueued, qkey: queueKey("a.com:81", 9), host: "a.com:81", parent: "http://a.com:8/"},
		{state: stExcluded, host: "", parent: "http://a.com/p", reason: "scheme"},
		{state: stFetched, host: "a.com", parent: "http://a.com", pageSeq: 4},
	}
	for _, want := range tests {
		for v, b := range [][]byte{encodeV1(&want), want.encode()} {
			got, err := decodeRecord(b)
			if err != nil || got.state != want.state || !bytes.Equal(got.qkey, want.qkey) || got.host != want.host ||
				got.parent != want.parent || got.hops != want.hops || got.pageSeq != want.pageSeq || got.reason != want.reason {
				t.Errorf("version %d: decode(%+v) = %+v, %v", v+1, want, got, err)
			}
		}
	}
	short := record{state: stQueued, qkey: queueKey("a.com", 7), host: "a.com", parent: "https://a.com/x"}
	if v1, v2 := len(encodeV1(&short)), len(short.encode()); v2 > v1-len("a.com")*2 {
		t.Errorf("version 2 record is %d bytes, version 1 %d", v2, v1)
	}
	for _, tt := range []struct{ host, url string }{
		{"a.com", "http://a.com/p"}, {"a.com", "https://a.com/?q"}, {"a.com", "http://a.com.evil/p"},
		{"a.com", "http://a.com:81/p"}, {"a.com:81", "http://a.com:81/p"}, {"a.com", "ftp://a.com/p"}, {"", "mailto:x@a.com"},
	} {
		v := queueValue(tt.host, tt.url)
		for _, val := range [][]byte{v, []byte(tt.url)} { // format 2, format 1
			if got, err := queueURL(tt.host, val); err != nil || got != tt.url {
				t.Errorf("queueURL(%q, %q) = %q, %v; want %q", tt.host, val, got, err, tt.url)
			}
		}
		if strings.HasPrefix(tt.url, "http") && strings.Contains(tt.url, "://"+tt.host+"/") && len(v) != len(tt.url)-len(tt.host)-strings.Index(tt.url, "://")-2 {
			t.Errorf("queueValue(%q, %q) = %q: host prefix kept", tt.host, tt.url, v)
		}
	}
}

// TestOpensFormat1Store rewrites a frontier's records and queue values in format 1, as older
// stores hold them, and checks that it opens, passes Check, and crawls on.
func TestOpensFormat1Store(t *testing.T) {
	tf := newTestFrontier(t)
	if _, err := tf.Add([]Entry{{URL: "http://a/", Host: "a"}, {URL: "https://a/s", Host: "a"}, {URL: "http://b/", Host: "b"}}); err != nil {
		t.Fatal(err)
	}
	l := tf.lease(t0, "a")
	tf.complete(l, Result{Kind: Fetched, Links: []Entry{{URL: "http://a/x", Host: "a", Parent: l.URL, Depth: 1}}})
	tf.complete(tf.lease(t0, "a"), Result{Kind: Retry, NotBefore: t0.Add(time.Second)})
	err := tf.db.Bolt().Update(func(tx *bbolt.Tx) error {
		seen, queue := tx.Bucket(bucketSeen), tx.Bucket(bucketQueue)
		if err := seen.ForEach(func(k, v []byte) error {
			r, err := decodeRecord(v)
			if err != nil {
				return err
			}
			return seen.Put(k, encodeV1(&r))
		}); err != nil {
			return err
		}
		return queue.ForEach(func(k, v []byte) error {
			url, err := queueURL(string(k[:len(k)-9]), v)
			if err != nil {
				return err
			}
			return queue.Put(k, []byte(url))
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	tf.reopen()
	if got := tf.state("http://a/x"); got.State != "queued" || got.Parent != "http://a/" {
		t.Errorf("state of a format 1 record: %+v", got)
	}
	var leased []string
	for _, host := range []string{"a", "a", "b"} {
		l := tf.lease(t0.Add(time.Minute), host)
		leased = append(leased, l.URL)
		tf.complete(l, Result{Kind: Fetched, Links: []Entry{{URL: "http://a/", Host: "a"}, {URL: "http://a/y", Host: "a", Parent: l.URL}}})
	}
	slices.Sort(leased)
	if want := []string{"http://a/x", "http://b/", "https://a/s"}; !slices.Equal(leased, want) {
		t.Errorf("leased %q, want %q", leased, want)
	}
	if c := tf.Counts(); c.Queued != 1 || c.Fetched != 4 {
		t.Errorf("counts %+v: want 1 queued (http://a/y), 4 fetched", c)
	}
}
