package export

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/storage"
)

// TestNewest: each URL's newest visit only, in fetch order; a newest 304 stands for the
// version it confirms, dated by the 304; an earlier 304 is an earlier visit like any; a 304
// that confirms nothing stored stays a 304; the counts say what was left out.
func TestNewest(t *testing.T) {
	html := http.Header{"Content-Type": {"text/html"}}
	at := func(h int) time.Time { return baseTime.Add(time.Duration(h) * time.Hour) }
	pages := []*storage.Page{
		{Seq: 1, URL: "http://a.example/p", Status: 200, Header: html, ContentType: "text/html", FetchedAt: at(0), Body: []byte("<title>v1</title>")},
		{Seq: 2, URL: "http://a.example/q", Status: 200, Header: html, ContentType: "text/html", FetchedAt: at(1), Body: []byte("<title>q1</title>")},
		{Seq: 3, URL: "http://a.example/q", Status: 304, FetchedAt: at(2), RevisitOf: 2},
		{Seq: 4, URL: "http://a.example/p", Status: 200, Header: html, ContentType: "text/html", FetchedAt: at(3), Body: []byte("<title>v2</title>")},
		{Seq: 5, URL: "http://a.example/q", Status: 200, Header: html, ContentType: "text/html", FetchedAt: at(4), Body: []byte("<title>q2</title>")},
		{Seq: 6, URL: "http://a.example/p", Status: 304, FetchedAt: at(5), Duration: time.Millisecond, RevisitOf: 4},
		{Seq: 7, URL: "http://a.example/lone", Status: 304, FetchedAt: at(6)},
	}
	get := func(seq uint64) (*storage.Page, error) {
		for _, p := range pages {
			if p.Seq == seq {
				c := *p
				return &c, nil
			}
		}
		return nil, storage.ErrNotFound
	}
	n := NewNewest(context.Background(), sliceSource(pages), sliceSource(pages), get)
	var got []string
	err := n.Pages(func(p *storage.Page) error {
		got = append(got, p.URL+" "+string(p.Body)+" "+p.FetchedAt.Sub(baseTime).String())
		if IsFolded(p) != (p.URL == "http://a.example/p") {
			t.Errorf("%s: IsFolded %v", p.URL, IsFolded(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://a.example/q <title>q2</title> 4h0m0s", "http://a.example/p <title>v2</title> 5h0m0s", "http://a.example/lone  6h0m0s"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("passed on:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n.Older() != 4 || n.Folded() != 1 {
		t.Errorf("Older %d, Folded %d; want 4, 1", n.Older(), n.Folded())
	}
	if pages[3].FetchedAt != at(3) || pages[3].RevisitOf != 0 {
		t.Errorf("the confirmed version itself was changed: %+v", pages[3])
	}

	// A 304 confirming a page the store lacks is damage, named by URL.
	broken := append(pages[:0:0], pages[0], &storage.Page{Seq: 2, URL: "http://a.example/p", Status: 304, RevisitOf: 9})
	err = NewNewest(context.Background(), sliceSource(broken), sliceSource(broken), get).Pages(func(*storage.Page) error { return nil })
	if !errors.Is(err, storage.ErrDamaged) || !strings.Contains(err.Error(), "http://a.example/p") {
		t.Errorf("a 304 confirming a missing page: %v", err)
	}

	// A cancelled context stops the pass over the metadata.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := NewNewest(ctx, sliceSource(pages), sliceSource(pages), get).Pages(func(*storage.Page) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestJSONLNotModified: a line that stands for a 304 says "not_modified", others do not.
func TestJSONLNotModified(t *testing.T) {
	var sb strings.Builder
	w := NewJSONL(&sb, &JSONLOptions{NoBody: true})
	folded := &storage.Page{Seq: 4, URL: "http://a.example/p", Status: 200, RevisitOf: 4, FetchedAt: baseTime}
	plain := &storage.Page{Seq: 5, URL: "http://a.example/q", Status: 200, FetchedAt: baseTime}
	for _, p := range []*storage.Page{folded, plain} {
		if err := w.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(sb.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], `,"not_modified":true}`) || strings.Contains(lines[1], "not_modified") {
		t.Errorf("lines:\n%s", sb.String())
	}
}
