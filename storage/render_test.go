package storage

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// renderedPage is testPage(i) as a browser rendered it, with dom as its rendered DOM.
func renderedPage(i int, cut RenderCut, dom string) *Page {
	p := testPage(i)
	p.Render = &RenderInfo{Cut: cut, Requests: 3 + i, Bytes: 12345, Took: 1500 * time.Millisecond}
	p.Rendered = []byte(dom)
	return p
}

func putPages(t *testing.T, db *DB, ps ...*Page) {
	t.Helper()
	err := db.Update(func(tx *bbolt.Tx) error {
		for _, p := range ps {
			if _, err := PutPage(tx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRenderedPages: a rendered page keeps its rendered DOM (compressed, beside its body) and
// what the render did; a sub-resource keeps its flag; a revisit whose body is the same as an
// earlier one's keeps its own DOM; PageMeta reads no DOM; a page not rendered has none.
func TestRenderedPages(t *testing.T) {
	db, _ := newTestDB(t)
	dom := "<html><head><title>Built</title></head><body>" + strings.Repeat("<p>from the API</p>", 200) + "</body></html>"
	first := renderedPage(1, RenderCutTimeout, dom)
	sub := testPage(5)
	sub.URL, sub.ContentType, sub.Subresource, sub.Parent = "http://api.test/items.json", "application/json", true, first.URL
	plain := testPage(6)
	again := renderedPage(1, RenderComplete, "<html><body>changed since</body></html>")
	again.SameAs = 1 // its body is the first's; its DOM is not
	empty := renderedPage(7, RenderCutBytes, "")
	putPages(t, db, first, sub, plain, again, empty)

	want := map[uint64]*Page{1: first, 2: sub, 3: plain, 4: again, 5: empty}
	check := func(how string, got *Page, withBody bool) {
		t.Helper()
		w := want[got.Seq]
		if !samePage(got, w, withBody) || got.Subresource != w.Subresource || !reflect.DeepEqual(got.Render, w.Render) {
			t.Errorf("%s: page %d = %+v (render %+v)\nwant %+v (render %+v)", how, got.Seq, got, got.Render, w, w.Render)
		}
		switch {
		case !withBody && got.Rendered != nil:
			t.Errorf("%s: page %d read a rendered DOM of %d bytes without its body", how, got.Seq, len(got.Rendered))
		case withBody && (got.Rendered == nil) != (w.Render == nil):
			t.Errorf("%s: page %d: rendered DOM nil %v, rendered %v", how, got.Seq, got.Rendered == nil, w.Render != nil)
		case withBody && !bytes.Equal(got.Rendered, w.Rendered):
			t.Errorf("%s: page %d: rendered DOM %q, want %q", how, got.Seq, got.Rendered, w.Rendered)
		}
	}
	n := 0
	if err := db.Pages(func(p *Page) error { n++; check("Pages", p, true); return nil }); err != nil || n != len(want) {
		t.Fatalf("Pages: %d pages, %v", n, err)
	}
	if err := db.PagesMeta(func(p *Page) error { check("PagesMeta", p, false); return nil }); err != nil {
		t.Fatal(err)
	}
	for seq := range want {
		p, err := db.Page(seq)
		if err != nil {
			t.Fatal(err)
		}
		check("Page", p, true)
		if p, err = db.PageMeta(seq); err != nil {
			t.Fatal(err)
		}
		check("PageMeta", p, false)
	}
	if p, _ := db.Page(4); !bytes.Equal(p.Body, first.Body) {
		t.Errorf("the revisit's body is %d bytes, want the first's %d", len(p.Body), len(first.Body))
	}

	var stored []uint64
	err := db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketRendered).ForEach(func(k, v []byte) error {
			stored = append(stored, uint64(k[7]))
			if k[7] == 1 && len(v) > len(dom)/5 {
				t.Errorf("the rendered DOM of %d bytes is stored in %d", len(dom), len(v))
			}
			return nil
		})
	})
	if err != nil || !reflect.DeepEqual(stored, []uint64{1, 4, 5}) {
		t.Errorf("rendered DOMs stored for pages %v (%v), want [1 4 5]", stored, err)
	}
	if problems, total, err := db.CheckPages(5); err != nil || total != 0 {
		t.Errorf("CheckPages: %v %q", err, problems)
	}
}

// TestRenderJSON: RenderInfo's metadata names the cut as a word, leaves a complete render's
// out, and reads back; a word it does not know is an error naming it.
func TestRenderJSON(t *testing.T) {
	for _, c := range []struct {
		cut  RenderCut
		want string
	}{
		{RenderComplete, `{"requests":2,"bytes":10,"took":5}`},
		{RenderCutTimeout, `{"cut":"timeout","requests":2,"bytes":10,"took":5}`},
		{RenderCutRequests, `{"cut":"requests","requests":2,"bytes":10,"took":5}`},
		{RenderCutBytes, `{"cut":"bytes","requests":2,"bytes":10,"took":5}`},
	} {
		r := &RenderInfo{Cut: c.cut, Requests: 2, Bytes: 10, Took: 5}
		b, err := json.Marshal(r)
		if err != nil || string(b) != c.want {
			t.Errorf("%v: %s, %v; want %s", c.cut, b, err, c.want)
		}
		var back RenderInfo
		if err := json.Unmarshal(b, &back); err != nil || back != *r {
			t.Errorf("%v: read back %+v, %v", c.cut, back, err)
		}
	}
	var r RenderInfo
	if err := json.Unmarshal([]byte(`{"cut":"exploded"}`), &r); err == nil || !strings.Contains(err.Error(), `"exploded"`) {
		t.Errorf("an unknown cut: %v; want an error naming it", err)
	}
	if _, err := json.Marshal(&RenderInfo{Cut: 9}); err == nil {
		t.Error("a cut without a name was written")
	}
}

// TestPutPageRenderedWithoutInfo: a rendered DOM without its RenderInfo is refused, naming
// the page, and nothing is stored.
func TestPutPageRenderedWithoutInfo(t *testing.T) {
	db, _ := newTestDB(t)
	p := testPage(1)
	p.Rendered = []byte("<html></html>")
	err := db.Update(func(tx *bbolt.Tx) error { _, err := PutPage(tx, p); return err })
	if err == nil || !strings.Contains(err.Error(), p.URL) {
		t.Fatalf("PutPage: %v; want an error naming %s", err, p.URL)
	}
	if n := 0; db.PagesMeta(func(*Page) error { n++; return nil }) != nil || n != 0 {
		t.Errorf("%d pages stored", n)
	}
}

// TestRenderedDamage: a rendered page whose DOM is missing or does not decode is damage (read,
// CheckPages), and Salvage leaves it out as it does a page whose body is lost, keeping the
// rendered pages that are whole, DOM included.
func TestRenderedDamage(t *testing.T) {
	for _, c := range []struct {
		name string
		harm func(b *bbolt.Bucket) error
		want string
	}{
		{"missing", func(b *bbolt.Bucket) error { return b.Delete(seqKey(2)) }, "rendered DOM missing"},
		{"garbled", func(b *bbolt.Bucket) error { return b.Put(seqKey(2), []byte("not zstd")) }, "rendered DOM:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, dir := newTestDB(t)
			putPages(t, db, renderedPage(1, RenderComplete, "<p>one</p>"), renderedPage(2, RenderComplete, "<p>two</p>"), testPage(3))
			if err := db.Update(func(tx *bbolt.Tx) error { return c.harm(tx.Bucket(bucketRendered)) }); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, FileName)
			if _, err := db.Page(2); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("Page(2): %v; want ErrDamaged, %q, naming %s", err, c.want, path)
			}
			if err := db.Pages(func(*Page) error { return nil }); !errors.Is(err, ErrDamaged) {
				t.Errorf("Pages: %v; want ErrDamaged", err)
			}
			if _, err := db.PageMeta(2); err != nil {
				t.Errorf("PageMeta(2): %v; the metadata is whole", err)
			}
			problems, total, err := db.CheckPages(5)
			if err != nil || total != 1 || !strings.Contains(problems[0], "page 2: "+c.want) {
				t.Errorf("CheckPages: %d %q %v; want page 2's DOM named", total, problems, err)
			}
			to := filepath.Join(t.TempDir(), "salvaged")
			st, err := db.Salvage(to, nil)
			if err != nil || st.BodiesLost != 1 {
				t.Fatalf("Salvage: %+v, %v; want one page left out", st, err)
			}
			s, err := Open(to, &Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var seqs []uint64
			if err := s.Pages(func(p *Page) error {
				seqs = append(seqs, p.Seq)
				if p.Seq == 1 && string(p.Rendered) != "<p>one</p>" {
					t.Errorf("salvaged page 1's DOM: %q", p.Rendered)
				}
				return nil
			}); err != nil || !reflect.DeepEqual(seqs, []uint64{1, 3}) {
				t.Errorf("salvaged pages %v (%v), want [1 3]", seqs, err)
			}
		})
	}
}

// openFixture copies the gzipped store file name from testdata into a new directory.
func openFixture(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStoreBeforeRender: a store written before pages were rendered (testdata: four pages,
// among them a 304 and a same-body revisit, and a robots.txt fetch) opens read-only and reads
// exactly as it was written, passes both checks, and once opened for writing takes rendered
// pages beside the old ones.
func TestStoreBeforeRender(t *testing.T) {
	dir := openFixture(t, "store-before-render.db.gz")
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	home := `<html><head><title>Old home</title></head><body><p>Kept as it was.</p><a href="/a">a</a></body></html>`
	pageA := `<html><title>Page a</title><p>aaa</p></html>`
	want := []*Page{
		{Seq: 1, URL: "http://old.test/", FinalURL: "http://old.test/", Status: 200, StatusLine: "HTTP/1.1 200 OK", Proto: "HTTP/1.1",
			Header: http.Header{"Content-Type": {"text/html; charset=utf-8"}}, ReqHeader: http.Header{"User-Agent": {"crawl-test"}},
			ReqMethod: "GET", FetchedAt: at, Duration: 3 * time.Millisecond, ContentType: "text/html", RemoteAddr: "127.0.0.1:80",
			Body: []byte(home)},
		{Seq: 2, URL: "http://old.test/a", FinalURL: "http://old.test/a", Status: 200, StatusLine: "HTTP/1.1 200 OK", Proto: "HTTP/1.1",
			Header: http.Header{"Content-Type": {"text/html"}, "Etag": {`"v1"`}}, ReqMethod: "GET", FetchedAt: at.Add(time.Second),
			Depth: 1, Parent: "http://old.test/", ContentType: "text/html", Truncated: true, DecodedFrom: "gzip", Body: []byte(pageA)},
		{Seq: 3, URL: "http://old.test/a", FinalURL: "http://old.test/a", Status: 304, StatusLine: "HTTP/1.1 304 Not Modified", Proto: "HTTP/1.1",
			Header: http.Header{"Etag": {`"v1"`}}, ReqMethod: "GET", FetchedAt: at.Add(time.Hour), Depth: 1, RevisitOf: 2},
		{Seq: 4, URL: "http://old.test/a", FinalURL: "http://old.test/a", Status: 200, StatusLine: "HTTP/1.1 200 OK", Proto: "HTTP/1.1",
			Header: http.Header{"Content-Type": {"text/html"}, "Etag": {`"v2"`}}, ReqMethod: "GET", FetchedAt: at.Add(2 * time.Hour),
			Depth: 1, ContentType: "text/html", SameAs: 2, NoIndex: true, Body: []byte(pageA)},
	}
	read := func(db *DB, n int) {
		t.Helper()
		var got []*Page
		if err := db.Pages(func(p *Page) error { got = append(got, p); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("%d pages, want %d", len(got), n)
		}
		for i, w := range want {
			g := *got[i]
			g.FetchedAt = g.FetchedAt.UTC()
			if !reflect.DeepEqual(&g, w) {
				t.Errorf("page %d = %+v\nwant %+v", i+1, &g, w)
			}
		}
		var robots []string
		if err := db.RobotsFetches(func(p *Page) error { robots = append(robots, p.URL+" "+string(p.Body)); return nil }); err != nil ||
			len(robots) != 1 || robots[0] != "http://old.test/robots.txt User-agent: *\nDisallow: /x\n" {
			t.Errorf("robots.txt fetches %q, %v", robots, err)
		}
		if problems, total, err := db.Check(5); err != nil || total != 0 {
			t.Errorf("Check: %v %q", err, problems)
		}
		if problems, total, err := db.CheckPages(5); err != nil || total != 0 {
			t.Errorf("CheckPages: %v %q", err, problems)
		}
	}

	db, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketRendered) != nil {
			t.Error("the fixture already has a rendered bucket: it tests nothing")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	read(db, 4)
	db.Close()

	db, err = Open(dir, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := renderedPage(1, RenderCutRequests, "<html><body>now rendered</body></html>")
	putPages(t, db, p)
	want = append(want, p)
	read(db, 5)
}
