package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// newTestDB opens a fresh store in t.TempDir and closes it at the end of the test.
func newTestDB(t *testing.T) (*DB, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(dir, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db, dir
}

func TestOpenCreatesAndReopens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	db, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutMeta("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, ro := range []bool{false, true} {
		db, err := Open(dir, &Options{ReadOnly: ro})
		if err != nil {
			t.Fatalf("reopen ReadOnly=%v: %v", ro, err)
		}
		v, ok, err := db.Meta("k")
		if err != nil || !ok || string(v) != "v" {
			t.Errorf("ReadOnly=%v: Meta = %q, %v, %v", ro, v, ok, err)
		}
		if ro {
			if err := db.PutMeta("k", []byte("w")); err == nil {
				t.Error("PutMeta on a read-only store succeeded")
			}
		}
		db.Close()
	}
}

func TestOpenReadOnlyMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(dir, &Options{ReadOnly: true})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read-only Open created the file: %v", err)
	}
}

// TestOpenLocked checks that a second Open of the same store fails with ErrLocked within the
// timeout instead of hanging: flock locks belong to an open file description, so this holds
// within one process too.
func TestOpenLocked(t *testing.T) {
	tests := []struct {
		name          string
		first, second bool // ReadOnly of the first and second Open
		wantLocked    bool
	}{
		{"writer-writer", false, false, true},
		{"writer-reader", false, true, true},
		{"reader-writer", true, false, true},
		{"reader-reader", true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			a, err := Open(dir, &Options{ReadOnly: tt.first})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			start := time.Now()
			b, err := Open(dir, &Options{ReadOnly: tt.second, Timeout: 50 * time.Millisecond})
			if !tt.wantLocked {
				if err != nil {
					t.Fatal(err)
				}
				b.Close()
				return
			}
			if !errors.Is(err, ErrLocked) {
				t.Fatalf("err = %v, want ErrLocked", err)
			}
			if !strings.Contains(err.Error(), "in use by another crawl") || !strings.Contains(err.Error(), dir) {
				t.Errorf("message %q should say the store is in use and name the path", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Open took %v", d)
			}
		})
	}
}

func TestOpenNotStore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randomBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	foreignBolt := func(t *testing.T, path string) {
		b, err := bbolt.Open(path, 0o644, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Update(func(tx *bbolt.Tx) error {
			_, err := tx.CreateBucket([]byte("other"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	tests := []struct {
		name  string
		write func(t *testing.T, path string)
	}{
		{"text", func(t *testing.T, path string) { os.WriteFile(path, []byte("hello, world\n"), 0o644) }},
		{"random-10", func(t *testing.T, path string) { os.WriteFile(path, randomBytes(10), 0o644) }},
		{"random-5000", func(t *testing.T, path string) { os.WriteFile(path, randomBytes(5000), 0o644) }},
		{"random-70000", func(t *testing.T, path string) { os.WriteFile(path, randomBytes(70000), 0o644) }},
		{"zeros-16384", func(t *testing.T, path string) { os.WriteFile(path, make([]byte, 16384), 0o644) }},
		{"foreign-bbolt", foreignBolt},
		{"other-version", func(t *testing.T, path string) {
			b, err := bbolt.Open(path, 0o644, nil)
			if err != nil {
				t.Fatal(err)
			}
			b.Update(func(tx *bbolt.Tx) error {
				bk, _ := tx.CreateBucket(formatBucket)
				return bk.Put(formatKey, []byte("crawl-store/99"))
			})
			b.Close()
		}},
	}
	for _, tt := range tests {
		for _, ro := range []bool{false, true} {
			name := tt.name
			if ro {
				name += "/readonly"
			}
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, FileName)
				tt.write(t, path)
				before, _ := os.ReadFile(path)
				db, err := Open(dir, &Options{ReadOnly: ro})
				if err == nil {
					db.Close()
					t.Fatal("Open succeeded")
				}
				if !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err = %v, want ErrNotStore naming %s", err, path)
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
					t.Error("Open modified a file that is not a store")
				}
			})
		}
	}
}

// TestOpenEmptyFile: an empty file (a store whose creation was interrupted) becomes a store.
func TestOpenEmptyFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, FileName), nil, 0o644)
	if _, err := Open(dir, &Options{ReadOnly: true}); !errors.Is(err, ErrNotStore) {
		t.Fatalf("read-only: err = %v, want ErrNotStore", err)
	}
	db, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
}

func testPage(i int) *Page {
	body := bytes.Repeat([]byte("<p>hello "+strings.Repeat("x", i)+"</p>\n"), 50)
	revisitOf, sameAs := uint64(0), uint64(0)
	switch i {
	case 2: // a 304 confirming page 1 (seq 2)
		body, revisitOf = nil, 2
	case 4: // the same body as page 3 (seq 4)
		body, sameAs = testPage(3).Body, 4
	}
	return &Page{
		RevisitOf:   revisitOf,
		SameAs:      sameAs,
		URL:         "http://a.test/" + strings.Repeat("p", i),
		FinalURL:    "http://a.test/final",
		Status:      200,
		StatusLine:  "HTTP/1.1 200 OK",
		Proto:       "HTTP/1.1",
		Header:      http.Header{"Content-Type": {"text/html; charset=utf-8"}},
		ReqHeader:   http.Header{"User-Agent": {"crawl-test"}},
		ReqMethod:   "GET",
		FetchedAt:   time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC),
		Duration:    time.Duration(i) * time.Millisecond,
		Depth:       i,
		Parent:      "http://a.test/",
		ContentType: "text/html",
		Truncated:   i%2 == 1,
		DecodedFrom: "gzip",
		RemoteAddr:  "127.0.0.1:80",
		Body:        body,
	}
}

func TestPages(t *testing.T) {
	db, _ := newTestDB(t)
	const n = 5
	var want []*Page
	for i := range n {
		p := testPage(i)
		var seq uint64
		err := db.Bolt().Update(func(tx *bbolt.Tx) error {
			var err error
			seq, err = PutPage(tx, p)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if seq != uint64(i+1) || p.Seq != seq {
			t.Fatalf("page %d: seq %d, p.Seq %d", i, seq, p.Seq)
		}
		want = append(want, p)
	}
	// A rolled-back PutPage stores nothing.
	db.Bolt().Update(func(tx *bbolt.Tx) error {
		PutPage(tx, testPage(9))
		return errors.New("roll back")
	})

	var got []*Page
	if err := db.Pages(func(p *Page) error { got = append(got, p); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("Pages: %d pages, want %d", len(got), n)
	}
	for i := range got {
		if !samePage(got[i], want[i], true) {
			t.Errorf("Pages[%d] = %+v\nwant %+v", i, got[i], want[i])
		}
		p, err := db.Page(want[i].Seq)
		if err != nil || !samePage(p, want[i], true) {
			t.Errorf("Page(%d) = %+v, %v", want[i].Seq, p, err)
		}
		p, err = db.PageMeta(want[i].Seq)
		if err != nil || !samePage(p, want[i], false) || p.Body != nil {
			t.Errorf("PageMeta(%d) = %+v, %v", want[i].Seq, p, err)
		}
	}
	got = nil
	if err := db.PagesMeta(func(p *Page) error { got = append(got, p); return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if !samePage(got[i], want[i], false) || got[i].Body != nil {
			t.Errorf("PagesMeta[%d] = %+v", i, got[i])
		}
	}
	stop := errors.New("stop")
	calls := 0
	if err := db.Pages(func(*Page) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("Pages with failing fn: err %v after %d calls", err, calls)
	}
	if _, err := db.Page(99); !errors.Is(err, ErrNotFound) {
		t.Errorf("Page(99): err = %v, want ErrNotFound", err)
	}
}

// TestPagesBodiless: a 304 naming the page it confirms and a 200 the same as an earlier page
// are stored without a body; reading the 200 reads the earlier page's body. A SameAs naming a
// page without a body of its own keeps its body.
func TestPagesBodiless(t *testing.T) {
	db, _ := newTestDB(t)
	first := testPage(1)
	first.Truncated = false
	notModified := &Page{URL: first.URL, Status: 304, RevisitOf: 1}
	same := &Page{URL: first.URL, Status: 200, Header: http.Header{"Etag": {`"new"`}}, Body: first.Body, SameAs: 1}
	odd := &Page{URL: first.URL, Status: 200, Body: []byte("kept"), SameAs: 2} // names the 304
	err := db.Bolt().Update(func(tx *bbolt.Tx) error {
		for _, p := range []*Page{first, notModified, same, odd} {
			if _, err := PutPage(tx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var stored []uint64
	err = db.Bolt().View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketBodies).ForEach(func(k, _ []byte) error {
			stored = append(stored, binary.BigEndian.Uint64(k))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(stored, []uint64{1, 4}) {
		t.Errorf("bodies stored for pages %v, want [1 4]", stored)
	}
	if n, size, err := db.StoredBodies(); err != nil || n != 2 || size != int64(len(compress(first.Body))+len(compress(odd.Body))) {
		t.Errorf("StoredBodies = %d, %d bytes, %v; want 2 bodies", n, size, err)
	}
	want := map[uint64][]byte{1: first.Body, 2: nil, 3: first.Body, 4: []byte("kept")}
	n := 0
	err = db.Pages(func(p *Page) error {
		n++
		if !bytes.Equal(p.Body, want[p.Seq]) {
			t.Errorf("Pages: page %d has a body of %d bytes, want %d", p.Seq, len(p.Body), len(want[p.Seq]))
		}
		return nil
	})
	if err != nil || n != 4 {
		t.Fatalf("Pages: %d pages, %v", n, err)
	}
	for seq, body := range want {
		p, err := db.Page(seq)
		if err != nil || !bytes.Equal(p.Body, body) {
			t.Errorf("Page(%d): %v, body of %d bytes, want %d", seq, err, len(p.Body), len(body))
		}
	}
	if p, err := db.Page(3); err != nil || p.Header.Get("ETag") != `"new"` || p.Status != 200 || p.SameAs != 1 {
		t.Errorf("Page(3) = %+v, %v: want its own status and headers", p, err)
	}
}

func samePage(a, b *Page, body bool) bool {
	if a.Seq != b.Seq || a.URL != b.URL || a.FinalURL != b.FinalURL || a.Status != b.Status ||
		a.StatusLine != b.StatusLine || a.Proto != b.Proto || a.ReqMethod != b.ReqMethod ||
		!a.FetchedAt.Equal(b.FetchedAt) || a.Duration != b.Duration || a.Depth != b.Depth ||
		a.Parent != b.Parent || a.ContentType != b.ContentType || a.Truncated != b.Truncated ||
		a.DecodedFrom != b.DecodedFrom || a.RemoteAddr != b.RemoteAddr || a.RevisitOf != b.RevisitOf || a.SameAs != b.SameAs ||
		a.Header.Get("Content-Type") != b.Header.Get("Content-Type") ||
		a.ReqHeader.Get("User-Agent") != b.ReqHeader.Get("User-Agent") {
		return false
	}
	return !body || bytes.Equal(a.Body, b.Body)
}

func TestBodyIsCompressed(t *testing.T) {
	db, _ := newTestDB(t)
	p := testPage(3)
	p.Body = bytes.Repeat([]byte("abcdefgh"), 10000)
	db.Bolt().Update(func(tx *bbolt.Tx) error { _, err := PutPage(tx, p); return err })
	db.Bolt().View(func(tx *bbolt.Tx) error {
		if n := len(tx.Bucket(bucketBodies).Get(seqKey(p.Seq))); n == 0 || n > len(p.Body)/10 {
			t.Errorf("stored body is %d bytes for %d bytes of input", n, len(p.Body))
		}
		return nil
	})
}

func TestHostStateRobotsMeta(t *testing.T) {
	db, dir := newTestDB(t)
	if _, ok, err := db.LoadHostState("a.test"); ok || err != nil {
		t.Fatalf("LoadHostState on empty store: %v, %v", ok, err)
	}
	if err := db.SaveHostStates(map[string][]byte{"a.test": []byte("A"), "b.test": {}}); err != nil {
		t.Fatal(err)
	}
	if err := db.SaveHostStates(map[string][]byte{"a.test": []byte("A2")}); err != nil {
		t.Fatal(err)
	}
	if err := db.SaveHostStates(map[string][]byte{"": []byte("x")}); err == nil {
		t.Error("empty host accepted")
	}
	for host, want := range map[string]string{"a.test": "A2", "b.test": ""} {
		v, ok, err := db.LoadHostState(host)
		if !ok || err != nil || string(v) != want {
			t.Errorf("LoadHostState(%s) = %q, %v, %v", host, v, ok, err)
		}
	}

	at := time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC)
	e := RobotsEntry{Host: "a.test", FetchedAt: at, Status: 200, Body: []byte("User-agent: *\nDisallow: /x\n"),
		Failures: 2, Err: "timeout", NextCheck: at.Add(time.Hour)}
	if err := db.PutRobots(e); err != nil {
		t.Fatal(err)
	}
	if err := db.PutRobots(RobotsEntry{}); err == nil {
		t.Error("PutRobots without host accepted")
	}
	got, ok, err := db.Robots("a.test")
	if !ok || err != nil || got.Host != e.Host || !got.FetchedAt.Equal(at) || got.Status != 200 ||
		string(got.Body) != string(e.Body) || got.Err != e.Err || got.Failures != 2 || !got.NextCheck.Equal(e.NextCheck) {
		t.Errorf("Robots = %+v, %v, %v", got, ok, err)
	}
	if _, ok, _ := db.Robots("b.test"); ok {
		t.Error("Robots(b.test) found")
	}

	if err := db.PutMeta("scope", []byte(`["a.test"]`)); err != nil {
		t.Fatal(err)
	}
	if err := db.PutMeta("", nil); err == nil {
		t.Error("empty meta key accepted")
	}
	if v, ok, err := db.Meta("scope"); !ok || err != nil || string(v) != `["a.test"]` {
		t.Errorf("Meta = %q, %v, %v", v, ok, err)
	}
	if _, ok, _ := db.Meta("none"); ok {
		t.Error("Meta(none) found")
	}
	_ = dir
}

// TestTrimRSS: dropping the mapped pages, also while a read transaction is open, changes no data.
func TestTrimRSS(t *testing.T) {
	db, _ := newTestDB(t)
	var want []*Page
	for i := range 1200 {
		p := testPage(i % 7)
		p.URL = fmt.Sprintf("http://a.test/%d", i)
		want = append(want, p)
	}
	if err := db.Bolt().Update(func(tx *bbolt.Tx) error {
		for _, p := range want {
			if _, err := PutPage(tx, p); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	i := 0
	err := db.Pages(func(p *Page) error { // trims every trimPages pages inside its transaction
		if i%300 == 0 {
			if err := db.TrimRSS(); err != nil { // and another reader trims meanwhile
				return err
			}
		}
		if !samePage(p, want[i], true) {
			t.Fatalf("page %d differs after trimming", i)
		}
		i++
		return nil
	})
	if err != nil || i != len(want) {
		t.Fatalf("Pages: %d pages, %v", i, err)
	}
	if err := db.TrimRSS(); err != nil {
		t.Fatal(err)
	}
	if p, err := db.Page(want[42].Seq); err != nil || !samePage(p, want[42], true) {
		t.Fatalf("Page after TrimRSS: %v", err)
	}
}

// TestPlainMetadata: page metadata is stored compressed, and metadata stored as plain JSON (by
// an earlier version) reads alike.
func TestPlainMetadata(t *testing.T) {
	db, _ := newTestDB(t)
	p := testPage(1)
	plain, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Bolt().Update(func(tx *bbolt.Tx) error {
		if _, err := PutPage(tx, p); err != nil {
			return err
		}
		if v := tx.Bucket(bucketPages).Get(seqKey(1)); len(v) >= len(plain) || v[0] == '{' {
			t.Errorf("metadata stored in %d bytes, as JSON %d", len(v), len(plain))
		}
		if err := tx.Bucket(bucketPages).Put(seqKey(2), plain); err != nil {
			return err
		}
		return tx.Bucket(bucketBodies).Put(seqKey(2), compress(p.Body))
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 2} {
		got, err := db.Page(seq)
		want := *p
		want.Seq = seq
		if err != nil || !samePage(got, &want, true) {
			t.Errorf("Page(%d) = %+v, %v", seq, got, err)
		}
	}
}
