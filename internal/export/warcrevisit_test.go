package export

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nlnwa/gowarc"

	"github.com/crawl-project/crawl/storage"
)

// TestWARCRevisit: a 304 that confirms a stored page is a revisit record (profile
// server-not-modified) referring to the page's URL and fetch time, holding the 304's headers
// and no payload, and gowarc reads it under strict validation; a 304 that confirms nothing
// stays a response.
func TestWARCRevisit(t *testing.T) {
	first := &storage.Page{Seq: 1, URL: "http://a.example/p", FinalURL: "http://a.example/p", Status: 200,
		StatusLine: "HTTP/1.1 200 OK", Proto: "HTTP/1.1", ReqMethod: "GET", FetchedAt: baseTime,
		Header:    http.Header{"Etag": {`"v1"`}, "Content-Type": {"text/html"}},
		ReqHeader: http.Header{"User-Agent": {"crawl-test"}}, ContentType: "text/html", Body: []byte("<p>v1</p>")}
	again := &storage.Page{Seq: 2, URL: first.URL, FinalURL: first.URL, Status: 304, StatusLine: "HTTP/1.1 304 Not Modified",
		Proto: "HTTP/1.1", ReqMethod: "GET", FetchedAt: baseTime.Add(24 * time.Hour), Header: http.Header{"Etag": {`"v1"`}},
		ReqHeader: http.Header{"User-Agent": {"crawl-test"}, "If-None-Match": {`"v1"`}}, RevisitOf: 1}
	same := &storage.Page{Seq: 4, URL: first.URL, FinalURL: first.URL, Status: 200, StatusLine: "HTTP/1.1 200 OK",
		Proto: "HTTP/1.1", ReqMethod: "GET", FetchedAt: baseTime.Add(48 * time.Hour), Header: first.Header,
		ReqHeader: first.ReqHeader, ContentType: "text/html", Body: first.Body, SameAs: 1}
	lone := &storage.Page{Seq: 3, URL: "http://a.example/q", FinalURL: "http://a.example/q", Status: 304,
		StatusLine: "HTTP/1.1 304 Not Modified", Proto: "HTTP/1.1", ReqMethod: "GET", FetchedAt: baseTime.Add(time.Hour)}
	pages := []*storage.Page{first, again, lone, same}
	original := func(seq uint64) (*storage.Page, error) {
		for _, p := range pages {
			if p.Seq == seq {
				return p, nil
			}
		}
		return nil, storage.ErrNotFound
	}
	w, err := NewWARC(filepath.Join(t.TempDir(), "x"), &WARCOptions{Date: baseTime, Rand: seededReader(testSeed), Original: original})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), sliceSource(pages), w, nil); err != nil {
		t.Fatal(err)
	}
	recs := readRawWARC(t, w.Files()[0])
	if len(recs) != 9 {
		t.Fatalf("%d records, want 9", len(recs))
	}
	dup := recs[8]
	if dup.get("WARC-Type") != "revisit" || dup.get("WARC-Profile") != "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest" ||
		dup.get("WARC-Refers-To-Target-URI") != first.URL || dup.get("WARC-Refers-To-Date") != "2024-05-01T12:30:45.123456Z" ||
		dup.get("WARC-Payload-Digest") != recs[2].get("WARC-Payload-Digest") || dup.get("WARC-Payload-Digest") != sha1B32(first.Body) {
		t.Errorf("identical-payload revisit header %v", dup.fields)
	}
	if head, payload := httpPayload(dup.block); len(payload) != 0 || !strings.HasPrefix(head, "HTTP/1.1 200 OK") {
		t.Errorf("identical-payload revisit block %q", dup.block)
	}
	rev := recs[4]
	if rev.get("WARC-Type") != "revisit" || rev.get("WARC-Profile") != "http://netpreserve.org/warc/1.1/revisit/server-not-modified" ||
		rev.get("WARC-Refers-To-Target-URI") != first.URL || rev.get("WARC-Refers-To-Date") != "2024-05-01T12:30:45.123456Z" ||
		rev.get("WARC-Concurrent-To") != recs[3].get("WARC-Record-ID") {
		t.Errorf("revisit record header %v", rev.fields)
	}
	if head, payload := httpPayload(rev.block); len(payload) != 0 || head[:len("HTTP/1.1 304")] != "HTTP/1.1 304" {
		t.Errorf("revisit block %q", rev.block)
	}
	if got := recs[6].get("WARC-Type"); got != "response" {
		t.Errorf("a 304 confirming no stored page: %s record, want response", got)
	}
	r, err := gowarc.NewWarcFileReader(w.Files()[0], 0, gowarc.WithStrictValidation(), gowarc.WithBlockErrorPolicy(gowarc.ErrFail))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	types := ""
	for {
		rec, off, v, err := r.Next()
		if err != nil {
			break
		}
		if !v.Valid() {
			t.Errorf("gowarc: record at %d: %v", off, v)
		}
		types += rec.Type().String() + " "
	}
	if types != "warcinfo request response request revisit request response request revisit " {
		t.Errorf("gowarc read %q", types)
	}
}
