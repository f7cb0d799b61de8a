package frontier

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
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
	for i, want := range tests {
		want.hostID = uint32(i + 1)
		want.host = testHostName(want.hostID)
		if want.qkey != nil && want.state == stQueued {
			want.qkey = idQueueKey(want.hostID, uint64(i))
		}
		for _, url := range []string{"http://" + want.host + "/p?q", "https://x.org/", "mailto:x@y"} {
			want.url = url
			got, err := decodeRecord4(want.encode4(), testHostNames)
			if err != nil || !sameRecord(got, want) {
				t.Errorf("version 4: decode(encode4(%+v)) = %+v, %v", want, got, err)
			}
		}
	}
	c := hostCounts{Queued: 5, Delayed: 1, Fetched: 1 << 30, Failed: 2, Excluded: 3, LastError: "dns: no such host"}
	for _, id := range []uint32{0, 1, 1 << 31} {
		if got, gotID, err := decodeHost(c.encode(id)); err != nil || got != c || gotID != id {
			t.Errorf("host counts round trip: %+v %d, %v", got, gotID, err)
		}
	}
	v1 := append([]byte{hostCountsVersion1}, c.encode(0)[2:]...) // format 1 and 2 stores: no ID
	if got, id, err := decodeHost(v1); err != nil || got != c || id != 0 {
		t.Errorf("version 1 host counts: %+v %d, %v", got, id, err)
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

// testHostName names host IDs in tests that decode records without a store.
func testHostName(id uint32) string { return fmt.Sprintf("h%d.example", id) }

func testHostNames(id uint32) (string, error) { return testHostName(id), nil }

func sameRecord(a, b record) bool {
	return a.role == b.role && a.state == b.state && a.depth == b.depth && a.attempts == b.attempts && a.hops == b.hops &&
		a.status == b.status && a.pageSeq == b.pageSeq && bytes.Equal(a.qkey, b.qkey) && a.host == b.host &&
		a.hostID == b.hostID && a.url == b.url && bytes.Equal(a.parentRef, b.parentRef) && a.parent == b.parent && a.reason == b.reason && a.detail == b.detail
}

// FuzzDecode feeds arbitrary bytes to the decoders of on-disk values: they must return an error
// or a value that encodes back to the same bytes, never panic.
func FuzzDecode(f *testing.F) {
	f.Add((&record{state: stFailed, host: "a", reason: "x", qkey: []byte{1}}).encode())
	f.Add((&hostCounts{Queued: 1, LastError: "e"}).encode(3))
	f.Add([]byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add((&record{state: stQueued, host: "a", qkey: queueKey("a", 1), role: RoleRequisite}).encode())
	f.Add((&record{state: stQueued, host: testHostName(2), hostID: 2, url: "http://h2.example/x", qkey: idQueueKey(2, 1), depth: 2, parent: "http://b/"}).encode4())
	f.Add((&record{state: stExcluded, url: "mailto:x", reason: "scheme", detail: "d", role: RoleRequisite}).encode4())
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeRecord4(b, testHostNames); err == nil {
			if r2, err := decodeRecord4(r.encode4(), testHostNames); err != nil || !sameRecord(r, r2) {
				t.Errorf("version 4 record does not round trip: %+v, %+v", r, r2)
			}
		}
		if r, err := decodeRecord(b); err == nil {
			if r2, err := decodeRecord(r.encode()); err != nil || r2.host != r.host || r2.detail != r.detail || r2.role != r.role {
				t.Errorf("record does not round trip: %+v", r)
			}
		}
		if c, id, err := decodeHost(b); err == nil && b != nil {
			if c2, id2, err := decodeHost(c.encode(id)); err != nil || c2 != c || id2 != id {
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

// fixtureStore copies testdata/format2-store.db.gz (testdata/README.md) into a new directory,
// lets change rewrite it (if not nil), and returns the directory.
func fixtureStore(t *testing.T, change func(tx *bbolt.Tx) error) string {
	t.Helper()
	return fixtureFile(t, "format2-store.db.gz", change)
}

// fixtureFile is fixtureStore for the fixture testdata/name.
func fixtureFile(t *testing.T, name string, change func(tx *bbolt.Tx) error) string {
	t.Helper()
	fh, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, storage.FileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if change != nil {
		db, err := storage.Open(dir, &storage.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		err = db.Bolt().Update(change)
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// toFormat1 rewrites a store's legacy records and queue values in format 1.
func toFormat1(tx *bbolt.Tx) error {
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
}

// fixtureStates are the states of the fixture's URLs (testdata/README.md).
var fixtureStates = map[string]string{
	"http://a.example/": "fetched", "http://a.example/q1": "fetched", fixtureLong: "fetched",
	"http://a.example/q2": "queued", "https://b.example/": "queued", "https://b.example/x": "queued", fixtureLong2: "queued",
	"http://a.example/retry": "queued", "http://a.example/fail": "failed", "http://a.example/style.css": "excluded",
	"http://c.example/": "excluded", "mailto:x@a.example": "excluded",
}

var (
	fixtureLong  = "http://a.example/" + strings.Repeat("l", 1100)
	fixtureLong2 = "http://a.example/" + strings.Repeat("m", 1100)
	fixtureNow   = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
)

// readLegacy reads the legacy records of the store in dir, by URL (a hashed key's URL is
// named by its queue entry, or by its page for fixtureLong), before it is upgraded.
func readLegacy(t *testing.T, dir string) map[string]record {
	t.Helper()
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	byKey := map[string]string{string(seenKey(fixtureLong)): fixtureLong, string(seenKey(fixtureLong2)): fixtureLong2}
	out := map[string]record{}
	if err := db.Bolt().View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketSeen).ForEach(func(k, v []byte) error {
			r, err := decodeRecord(v)
			if err != nil {
				return err
			}
			u := string(k)
			if k[0] == 0xff {
				u = byKey[u]
			}
			out[u] = r
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUpgradesFormat2Store opens a store written in format 2 (records keyed by the URL; and
// the same rewritten in format 1): read-only it is refused, for writing it is upgraded, the
// copy of the old file removed once the upgrade committed, and every URL keeps its state,
// depth, parent, status, reason, attempts, role and page; the queues keep their order; then the
// crawl goes on.
func TestUpgradesFormat2Store(t *testing.T) {
	for _, format := range []struct {
		name   string
		change func(*bbolt.Tx) error
	}{{"format2", nil}, {"format1", toFormat1}} {
		t.Run(format.name, func(t *testing.T) { testUpgradesOldStore(t, fixtureStore(t, format.change), format.change == nil) })
	}
}

func testUpgradesOldStore(t *testing.T, dir string, roles bool) {
	old := readLegacy(t, dir)
	if len(old) != len(fixtureStates) {
		t.Fatalf("fixture: %d legacy records, want %d", len(old), len(fixtureStates))
	}
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(db, nil); !errors.Is(err, ErrOldFormat) {
		t.Errorf("read-only Open of a format 2 store: %v, want ErrOldFormat", err)
	}
	db.Close()

	tf := &testFrontier{t: t, dir: dir}
	tf.open()
	t.Cleanup(func() { tf.check(); tf.db.Close() })
	tf.check()
	if st := tf.upgraded; st.records != len(fixtureStates) || st.entries != 4 || st.dropped != 0 {
		t.Errorf("upgrade: %+v, want %d records, 4 queue entries (q2, the long one, b.example's two), none dropped", st, len(fixtureStates))
	}
	if _, err := os.Stat(filepath.Join(dir, storage.FileName+BackupSuffix)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the copy of the old store is still there after the upgrade: %v", err)
	}
	if err := tf.bolt.View(func(tx *bbolt.Tx) error {
		if legacyIn(tx) != legacyAbsent {
			t.Error("legacy buckets left after the upgrade")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for u, r := range old {
		s := tf.state(u)
		want := r.public()
		want.Parent = r.parent
		if s != want {
			t.Errorf("%.40s: %+v, want %+v", u, s, want)
		}
		if s.State != fixtureStates[u] {
			t.Errorf("%.40s: %s, want %s", u, s.State, fixtureStates[u])
		}
	}
	walked := 0
	if err := tf.Walk(func(URLRecord) error { walked++; return nil }); err != nil || walked != len(fixtureStates) {
		t.Errorf("Walk: %d URLs (%v), want %d", walked, err, len(fixtureStates))
	}
	if s := tf.state("http://a.example/style.css"); roles && s.Role != RoleRequisite || s.Reason != ReasonRobots {
		t.Errorf("requisite: %+v", s)
	}
	if n := tf.add("http://a.example/q1", fixtureLong, fixtureLong2, "mailto:x@a.example", "http://a.example/new"); n != 1 {
		t.Errorf("Add of 4 old URLs and a new one added %d", n)
	}
	// The queues, in order: q2, then the long one, then the URL just added, then the retry,
	// which comes due and goes to the back.
	now := fixtureNow.Add(2 * time.Hour)
	var leased []string
	for range 4 {
		l := tf.lease(now, "a.example")
		leased = append(leased, l.URL)
		tf.complete(l, Result{Kind: Fetched, Page: page(l.URL), Links: []Entry{
			{URL: "http://a.example/fail", Host: "a.example"}, {URL: fixtureLong, Host: "a.example"},
			{URL: "http://a.example/from-" + l.URL[len(l.URL)-3:], Host: "a.example", Parent: l.URL}}})
	}
	if want := []string{"http://a.example/q2", fixtureLong2, "http://a.example/new", "http://a.example/retry"}; !slices.Equal(leased, want) {
		t.Errorf("leased %.40q, want %.40q", leased, want)
	}
	if l := tf.lease(now, "b.example"); l.URL != "https://b.example/" {
		t.Errorf("b.example: leased %s first, want https://b.example/", l.URL)
	}
	if c := tf.Counts(); c.Queued != 6 || c.Fetched != 3+4 || c.Failed != 1 || c.Excluded != 3 {
		t.Errorf("counts %+v", c)
	}
	tf.reopen()
	rev, err := tf.Revise(func(r URLRecord) Verdict {
		switch {
		case r.State == "failed":
			return Verdict{Action: Requeue}
		case r.URL == "http://a.example/q1" || r.URL == fixtureLong:
			return Verdict{Action: Revisit}
		}
		return Verdict{}
	})
	if err != nil || rev.RequeuedFailed["status"] != 1 || rev.Revisited != 2 {
		t.Fatalf("Revise: %+v, %v", rev, err)
	}
}

// TestUpgradesMixedStore upgrades a format 2 store that the frontier before the upgrade went
// on crawling (testdata/README.md): each host's legacy queue entries go before its newer ones.
func TestUpgradesMixedStore(t *testing.T) {
	tf := &testFrontier{t: t, dir: fixtureFile(t, "format2-mixed-store.db.gz", nil)}
	tf.open()
	t.Cleanup(func() { tf.check(); tf.db.Close() })
	tf.check()
	now := fixtureNow.Add(2 * time.Hour)
	for host, want := range map[string][]string{
		"a.example": {fixtureLong2, "http://a.example/new1", "http://a.example/new2", "http://a.example/new3", "http://a.example/retry"},
		"b.example": {"https://b.example/", "https://b.example/x"},
		"d.example": {"http://d.example/"},
	} {
		var got []string
		for range want {
			l := tf.lease(now, host)
			got = append(got, l.URL)
			tf.complete(l, Result{Kind: Fetched, Page: page(l.URL)})
		}
		tf.noLease(now, host)
		if !slices.Equal(got, want) {
			t.Errorf("%s: leased %.40q, want %.40q", host, got, want)
		}
	}
	if s := tf.state("http://a.example/new3"); s.State != "fetched" || s.Parent != "http://a.example/q2" {
		t.Errorf("new3: %+v", s)
	}
}

// TestUpgradeKeepsTheOldFile makes an upgrade fail (a legacy record that does not decode): Open
// reports it, the store is unchanged, and the copy of it is kept.
func TestUpgradeKeepsTheOldFile(t *testing.T) {
	dir := fixtureStore(t, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketSeen).Put([]byte("http://a.example/broken"), []byte{9, 9})
	})
	path := filepath.Join(dir, storage.FileName)
	db, err := storage.Open(dir, &storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(db, nil); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "broken") {
		t.Errorf("Open: %v, want ErrCorrupt naming the broken record", err)
	}
	err = db.Bolt().View(func(tx *bbolt.Tx) error {
		if legacyIn(tx) != legacyRecords || tx.Bucket(bucketURLs).Stats().KeyN != 0 {
			t.Error("the failed upgrade changed the store")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	backup, err := os.ReadFile(path + BackupSuffix)
	if err != nil {
		t.Fatalf("no copy of the old store: %v", err)
	}
	// The copy is the old store: it opens and holds the broken record.
	copyDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(copyDir, storage.FileName), backup, 0o600); err != nil {
		t.Fatal(err)
	}
	cdb, err := storage.Open(copyDir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cdb.Close()
	if err := cdb.Bolt().View(func(tx *bbolt.Tx) error {
		if n := tx.Bucket(bucketSeen).Stats().KeyN; n != len(fixtureStates)+1 {
			t.Errorf("the copy holds %d legacy records, want %d", n, len(fixtureStates)+1)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestUpgradeDropsEmptyLegacyBuckets opens a format 3 store as the frontier before the upgrade
// left it (empty legacy buckets, the legacy queue's sequence numbering delayed entries): the
// buckets go, without a copy of the store, and delayed entries go on numbering after it.
func TestUpgradeDropsEmptyLegacyBuckets(t *testing.T) {
	tf := newTestFrontier(t)
	tf.add("http://a/1", "http://a/2")
	if err := tf.db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(tf.dir, &storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Bolt().Update(func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucket(bucketSeen); err != nil {
			return err
		}
		q, err := tx.CreateBucket(bucketQueue)
		if err != nil {
			return err
		}
		return q.SetSequence(42)
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	tf.open()
	if st := tf.upgraded; st != (upgradeStats{}) {
		t.Errorf("upgrade of empty buckets: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(tf.dir, storage.FileName+BackupSuffix)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a copy was made (%v)", err)
	}
	l := tf.lease(t0, "a")
	tf.complete(l, Result{Kind: Retry, NotBefore: t0.Add(time.Minute)})
	if err := tf.bolt.View(func(tx *bbolt.Tx) error {
		if legacyIn(tx) != legacyAbsent {
			t.Error("legacy buckets left")
		}
		k, _ := tx.Bucket(bucketDelayed).Cursor().First()
		if seq := binary.BigEndian.Uint64(k[8:]); seq != 43 {
			t.Errorf("delayed entry numbered %d, want 43 (after the legacy queue's 42)", seq)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
