package crawler

import (
	"net/http"
	"testing"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/storage"
)

// TestPageDocRendered: a rendered page's Doc is its rendered DOM, and says it was rendered;
// a page not rendered is its body; a sub-resource says what it is.
func TestPageDocRendered(t *testing.T) {
	stored := &storage.Page{URL: "http://a.test/", FinalURL: "http://a.test/", Status: 200, Header: http.Header{},
		ContentType: "text/html", Body: []byte(`<title>Loading…</title><div id=app></div>`),
		Render:   &storage.RenderInfo{Cut: storage.RenderCutTimeout, Requests: 2},
		Rendered: []byte(`<html><head><title>Built</title></head><body><div id="app"><h1>Prices</h1></div></body></html>`)}
	p := pageOf(stored, frontier.RolePage)
	doc, err := p.Doc()
	if err != nil {
		t.Fatal(err)
	}
	if got := doc.Find("title").Text(); got != "Built" || doc.Find("h1").Text() != "Prices" {
		t.Errorf("rendered page: title %q, want the DOM's", got)
	}
	if p.Render == nil || p.Render.Cut != storage.RenderCutTimeout || string(p.Body) != string(stored.Body) {
		t.Errorf("rendered page: Render %+v, Body %q", p.Render, p.Body)
	}
	if doc.Url == nil || doc.Url.String() != "http://a.test/" {
		t.Errorf("document URL %v", doc.Url)
	}

	plain := pageOf(&storage.Page{URL: "http://a.test/b", FinalURL: "http://a.test/b", Body: []byte(`<title>Plain</title>`)}, frontier.RolePage)
	if doc, err := plain.Doc(); err != nil || doc.Find("title").Text() != "Plain" || plain.Render != nil {
		t.Errorf("page not rendered: %v, Render %+v", err, plain.Render)
	}
	sub := pageOf(&storage.Page{URL: "http://cdn.test/s.css", Parent: "http://a.test/", Subresource: true}, frontier.RolePage)
	if !sub.Subresource || sub.Parent != "http://a.test/" {
		t.Errorf("sub-resource: %+v", sub)
	}
}
