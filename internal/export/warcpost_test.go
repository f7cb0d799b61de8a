package export

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
	"github.com/nlnwa/gowarc"
)

// TestWARCPostRequest: a sub-resource fetched by POST has a request record with its method,
// its Content-Length and its body, which a strict WARC reader accepts.
func TestWARCPostRequest(t *testing.T) {
	pages := renderedSite()
	const body = `{"page":3,"q":"caf\u00e9"}`
	at := time.Date(2026, 12, 1, 10, 0, 2, 0, time.UTC)
	post := &storage.Page{Seq: 9, URL: "http://api.example/search", FinalURL: "http://api.example/search", Status: 200,
		StatusLine: "HTTP/1.1 200 OK", Proto: "HTTP/1.1", Header: http.Header{"Content-Type": {"application/json"}},
		ReqHeader: http.Header{"Content-Type": {"application/json"}, "User-Agent": {"crawl/0.1"}}, ReqMethod: "POST",
		ReqBody: []byte(body), FetchedAt: at, ContentType: "application/json", RemoteAddr: "127.0.0.1:80",
		Body: []byte(`{"text":"x"}`), Subresource: true, Parent: pages[0].URL, Depth: 1}
	pages = append(pages[:1], append([]*storage.Page{post}, pages[1:]...)...)
	w, err := NewWARC(filepath.Join(t.TempDir(), "p"), &WARCOptions{Date: time.Now(), Rand: seededReader(testSeed)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), sliceSource(pages), w, nil); err != nil {
		t.Fatal(err)
	}
	var req *rawRecord
	recs := readRawWARC(t, w.Files()[0])
	for i, r := range recs {
		if r.get("WARC-Type") == "request" && r.get("WARC-Target-URI") == post.URL {
			req = &recs[i]
		}
	}
	if req == nil {
		t.Fatal("no request record for the POST")
	}
	head, got, ok := bytes.Cut(req.block, []byte("\r\n\r\n"))
	switch {
	case !ok || !strings.HasPrefix(string(head), "POST /search HTTP/1.1\r\n"):
		t.Errorf("request head %q", head)
	case !strings.Contains(string(head), "\r\nContent-Length: "+strconv.Itoa(len(body))):
		t.Errorf("request head %q lacks Content-Length %d", head, len(body))
	case string(got) != body:
		t.Errorf("request body %q, want %q", got, body)
	}

	r, err := gowarc.NewWarcFileReader(w.Files()[0], 0, gowarc.WithStrictValidation(), gowarc.WithBlockErrorPolicy(gowarc.ErrFail))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for n := 0; ; n++ {
		rec, off, v, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil || !v.Valid() {
			t.Fatalf("gowarc: record %d at %d: %v %v", n, off, err, v)
		}
		if rec.Type() == gowarc.Request && rec.WarcHeader().Get(gowarc.WarcTargetURI) == post.URL {
			hb, ok := rec.Block().(gowarc.HttpRequestBlock)
			if !ok {
				t.Fatalf("gowarc reads the POST's request block as %T", rec.Block())
			}
			rd, err := hb.PayloadBytes()
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := io.ReadAll(rd); string(b) != body {
				t.Errorf("gowarc request payload %q, want %q", b, body)
			}
		}
		_ = rec.Close()
	}
}
