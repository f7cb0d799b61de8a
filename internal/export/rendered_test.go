package export

import (
	"bytes"
	"context"
	"encoding/csv"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nlnwa/gowarc"

	"github.com/crawl-project/crawl/storage"
)

// shellBody is what the server sends for a page built by script: an application shell.
const shellBody = `<!doctype html><html><head><meta charset="windows-1252"><title>Loading…</title>` +
	`<link rel=stylesheet href="http://cdn.example/site.css"><script src="/app.js"></script></head>` +
	`<body><div id=app>Loading…</div><a href="/about">about</a></body></html>`

// renderedDOM is that page as the browser left it (UTF-8, whatever the body's charset).
const renderedDOM = `<html><head><meta charset="windows-1252"><title>Prices — été</title>` +
	`<link rel="stylesheet" href="http://cdn.example/site.css"><script src="/app.js"></script>` +
	`<script>window.boot()</script></head><body onload="boot()"><div id="app"><h1>Prices</h1>` +
	`<p class="price">12 €</p><p class="price">15 €</p><img src="http://cdn.example/logo.png">` +
	`<a href="/item/1">one</a><a href="/item/2">two</a><a href="javascript:boot()">again</a></div>` +
	`<a href="/about">about</a></body></html>`

// renderedSite is a rendered page, two of its sub-resources and a page not rendered.
func renderedSite() []*storage.Page {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	page := func(seq uint64, u, ctype, body string) *storage.Page {
		return &storage.Page{Seq: seq, URL: u, FinalURL: u, Status: 200, StatusLine: "HTTP/1.1 200 OK", Proto: "HTTP/1.1",
			ReqMethod: "GET", ReqHeader: http.Header{"User-Agent": {"crawl-test"}}, FetchedAt: at.Add(time.Duration(seq) * time.Second),
			Duration: 20 * time.Millisecond, Header: http.Header{"Content-Type": {ctype}}, ContentType: strings.Split(ctype, ";")[0],
			RemoteAddr: "127.0.0.1:80", Body: []byte(body)}
	}
	shell := page(1, "http://www.example/", "text/html", shellBody)
	shell.Render = &storage.RenderInfo{Cut: storage.RenderCutTimeout, Requests: 3, Bytes: 900, Took: 2 * time.Second}
	shell.Rendered = []byte(renderedDOM)
	css := page(2, "http://cdn.example/site.css", "text/css", `body{background:url(logo.png)}`)
	logo := page(3, "http://cdn.example/logo.png", "image/png", "\x89PNG\r\n\x1a\nfake")
	for _, s := range []*storage.Page{css, logo} {
		s.Subresource, s.Parent, s.Depth = true, shell.URL, 1
	}
	plain := page(4, "http://www.example/about", "text/html", `<title>About</title><p>Plain <a href="/">home</a></p>`)
	plain.Parent, plain.Depth = shell.URL, 1
	return []*storage.Page{shell, css, logo, plain}
}

// TestJSONLRendered: title, text, outlinks and fields of a rendered page come from its
// rendered DOM (read as UTF-8, whatever the body's charset) and the line says "rendered": true
// and the cap that cut it; the body stays the server's; a page not rendered is read as before;
// a sub-resource fed to the writer is a line marked "subresource", counted apart from pages.
func TestJSONLRendered(t *testing.T) {
	fields, err := ParseFields([]string{"prices[]=.price", "h1=h1"})
	if err != nil {
		t.Fatal(err)
	}
	pages := renderedSite()
	var buf bytes.Buffer
	w := NewJSONL(&buf, &JSONLOptions{Text: true, Fields: fields})
	st, err := Run(context.Background(), sliceSource(pages), w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pages != 2 || st.Subresources != 2 {
		t.Errorf("stats %+v: want 2 pages and 2 sub-resources", st)
	}
	lines := jsonlLines(t, pages, &JSONLOptions{Text: true, Fields: fields}, nil)
	shell := lines["http://www.example/"]
	want := map[string]any{
		"title": "Prices — été", "rendered": true, "render_cut": "timeout", "body": shellBody,
		"text": "Prices 12 € 15 € onetwoagain about", "charset": "utf-8", // the body's
		// /about from both; /item/1 and /item/2 from the DOM only; the stylesheet is no link.
		"outlinks": 3.0,
	}
	for k, v := range want {
		if shell[k] != v {
			t.Errorf("rendered page: %s = %#v, want %#v", k, shell[k], v)
		}
	}
	if f := shell["fields"].(map[string]any); f["h1"] != "Prices" || len(f["prices"].([]any)) != 2 {
		t.Errorf("rendered page: fields %v, want the DOM's", f)
	}
	about := lines["http://www.example/about"]
	if about["title"] != "About" || about["rendered"] != nil || about["render_cut"] != nil || about["subresource"] != nil {
		t.Errorf("page not rendered: %v", about)
	}
	if css := lines["http://cdn.example/site.css"]; css["subresource"] != true || css["parent"] != "http://www.example/" {
		t.Errorf("sub-resource line %v", css)
	}

	// Without bodies (PagesMeta), Full reads the page whole, DOM included; without Full, a
	// rendered page's fields are left out rather than read in something else.
	meta := make([]*storage.Page, len(pages))
	for i, p := range pages {
		c := *p
		c.Body, c.Rendered = nil, nil
		meta[i] = &c
	}
	full := func(p *storage.Page) (*storage.Page, error) { return pages[p.Seq-1], nil }
	if got := jsonlLines(t, meta, &JSONLOptions{NoBody: true, Full: full, Text: true}, nil)["http://www.example/"]; got["title"] != want["title"] || got["text"] != want["text"] {
		t.Errorf("no body, Full: title %#v text %#v", got["title"], got["text"])
	}
	half := func(p *storage.Page) (*storage.Page, error) { c := *pages[p.Seq-1]; c.Rendered = nil; return &c, nil }
	if got := jsonlLines(t, meta, &JSONLOptions{NoBody: true, Full: half, Text: true}, nil)["http://www.example/"]; got["title"] != nil || got["text"] != nil || got["rendered"] != true {
		t.Errorf("rendered page read without its DOM: title %#v text %#v rendered %#v; want none and rendered", got["title"], got["text"], got["rendered"])
	}
}

// TestPagesOnly: PagesOnly leaves the sub-resources out and counts them; JSON Lines and CSV
// fed through it write pages only.
func TestPagesOnly(t *testing.T) {
	var left int64
	lines := map[string]bool{}
	var buf bytes.Buffer
	st, err := Run(context.Background(), PagesOnly(sliceSource(renderedSite()), &left), NewJSONL(&buf, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		lines[l[:strings.Index(l, `","`)]] = true
	}
	if left != 2 || st.Pages != 2 || st.Subresources != 0 || len(lines) != 2 {
		t.Errorf("left %d, stats %+v, %d lines; want 2 left out and 2 pages", left, st, len(lines))
	}
}

// TestCSVRendered: a rendered page's row holds its fields as the rendered DOM gives them.
func TestCSVRendered(t *testing.T) {
	fields, err := ParseFields([]string{"h1=h1", "prices[]=.price"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := NewCSV(&buf, fields, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), PagesOnly(sliceSource(renderedSite()), nil), w, nil); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"url", "h1", "prices"}, {"http://www.example/", "Prices", `["12 €","15 €"]`}, {"http://www.example/about", "", "[]"}}
	if len(rows) != len(want) {
		t.Fatalf("rows %q, want %q", rows, want)
	}
	for i := range want {
		if strings.Join(rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("row %d = %q, want %q", i, rows[i], want[i])
		}
	}
}

// TestWARCRendered: a rendered page is its request and response, then a conversion record of
// its rendered DOM that refers to the response by WARC-Refers-To, with the document's target
// URI, a text/html UTF-8 block, the cap that cut the render, and none of the fields the
// standard forbids on conversion records (WARC-Concurrent-To, WARC-IP-Address); each
// sub-resource is a request and response pair; gowarc reads the file under strict validation.
func TestWARCRendered(t *testing.T) {
	pages := renderedSite()
	w, err := NewWARC(filepath.Join(t.TempDir(), "r"), &WARCOptions{Date: time.Now(), Rand: seededReader(testSeed)})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Run(context.Background(), sliceSource(pages), w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pages != 2 || st.Subresources != 2 {
		t.Errorf("stats %+v: want 2 pages and 2 sub-resources", st)
	}
	recs := readRawWARC(t, w.Files()[0])
	var types []string
	for _, r := range recs {
		types = append(types, r.get("WARC-Type")+" "+r.get("WARC-Target-URI"))
	}
	wantTypes := []string{"warcinfo ", "request http://www.example/", "response http://www.example/", "conversion http://www.example/",
		"request http://cdn.example/site.css", "response http://cdn.example/site.css",
		"request http://cdn.example/logo.png", "response http://cdn.example/logo.png",
		"request http://www.example/about", "response http://www.example/about"}
	if strings.Join(types, "\n") != strings.Join(wantTypes, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(types, "\n"), strings.Join(wantTypes, "\n"))
	}
	conv, resp := recs[3], recs[2]
	switch {
	case conv.get("WARC-Refers-To") != resp.get("WARC-Record-ID"):
		t.Errorf("conversion refers to %q, want the response %q", conv.get("WARC-Refers-To"), resp.get("WARC-Record-ID"))
	case string(conv.block) != renderedDOM:
		t.Errorf("conversion block %q, want the rendered DOM", conv.block)
	case conv.get("Content-Type") != "text/html; charset=utf-8" || conv.get("WARC-Crawl-Render-Cut") != "timeout":
		t.Errorf("conversion header %v", conv.fields)
	case conv.get("WARC-Payload-Digest") != "" && conv.get("WARC-Payload-Digest") != sha1B32([]byte(renderedDOM)):
		t.Errorf("conversion payload digest %q", conv.get("WARC-Payload-Digest"))
	case conv.count("WARC-Concurrent-To") != 0 || conv.count("WARC-IP-Address") != 0:
		t.Errorf("conversion header %v: fields the standard forbids on it", conv.fields)
	case conv.get("WARC-Date") != "2026-12-01T10:00:01.020000Z":
		t.Errorf("conversion dated %q, want when the document was read", conv.get("WARC-Date"))
	}
	if string(httpPayloadOf(t, resp.block)) != shellBody {
		t.Error("the response does not hold the body as the server sent it")
	}

	r, err := gowarc.NewWarcFileReader(w.Files()[0], 0, gowarc.WithStrictValidation(), gowarc.WithBlockErrorPolicy(gowarc.ErrFail))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for {
		rec, off, v, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil || !v.Valid() {
			t.Fatalf("gowarc: record %d at %d: %v %v", n, off, err, v)
		}
		_ = rec.Close()
		n++
	}
	if n != len(wantTypes) {
		t.Errorf("gowarc read %d records, want %d", n, len(wantTypes))
	}
}

func httpPayloadOf(t *testing.T, block []byte) []byte {
	t.Helper()
	_, p := httpPayload(block)
	return p
}

// mirrorRendered mirrors pages into a new directory and returns the stats and the files.
func mirrorRendered(t *testing.T, pages []*storage.Page, opts *MirrorOptions) (Stats, map[string]string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "m")
	w, err := NewMirror(root, sliceSource(pages), opts)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Run(context.Background(), sliceSource(pages), w, nil)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, files
}

// TestMirrorRendered: the mirror writes a rendered page's DOM, not its shell, with no script
// left to run (no <script>, no on… handler, no javascript: URL), declared UTF-8 in place of
// the charset the original declared, after a doctype; its style sheet and image, sub-resources,
// are files of the mirror its links lead to; with KeepLinks the DOM is inert all the same.
func TestMirrorRendered(t *testing.T) {
	st, files := mirrorRendered(t, renderedSite(), nil)
	if st.Pages != 2 || st.Subresources != 2 || len(files) != 4 {
		t.Errorf("stats %+v, files %v: want 2 pages and 2 sub-resources, 4 files", st, len(files))
	}
	home, ok := files["www.example/index.html"]
	if !ok {
		t.Fatalf("no file for the rendered page: %v", files)
	}
	check := func(what, doc string, want []string) {
		t.Helper()
		for _, s := range want {
			if !strings.Contains(doc, s) {
				t.Errorf("%s: lacks %q:\n%s", what, s, doc)
			}
		}
		low := strings.ToLower(doc)
		for _, s := range []string{"<script", "onload", "javascript:", "windows-1252", "loading…"} {
			if strings.Contains(low, s) {
				t.Errorf("%s: holds %q:\n%s", what, s, doc)
			}
		}
		if !strings.HasPrefix(doc, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>") {
			t.Errorf("%s: begins %q", what, doc[:min(len(doc), 80)])
		}
	}
	check("converted", home, []string{"<h1>Prices</h1>", `href="../cdn.example/site.css"`, `src="../cdn.example/logo.png"`, `href="about.html"`})
	if files["cdn.example/site.css"] == "" || !strings.HasPrefix(files["cdn.example/logo.png"], "\x89PNG") {
		t.Errorf("sub-resources not mirrored: %v", files)
	}

	_, files = mirrorRendered(t, renderedSite(), &MirrorOptions{KeepLinks: true})
	check("links kept", files["www.example/index.html"], []string{"<h1>Prices</h1>", `href="http://cdn.example/site.css"`})
}

// TestOfflineDOM: what offlineDOM removes and what it keeps, case by case.
func TestOfflineDOM(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`<html><head><script>a()</script><script src=x.js></script></head><body><p>t</p></body></html>`,
			`<!DOCTYPE html>` + "\n" + `<html><head><meta charset="utf-8"></head><body><p>t</p></body></html>`},
		{`<!doctype html><html><head><meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1"></head><body>é</body></html>`,
			`<!doctype html><html><head><meta charset="utf-8"></head><body>é</body></html>`},
		{`<html><head></head><body><a href=" JavaScript:go()" class=k onclick="go()">x</a><img src=a.png onerror=bad()></body></html>`,
			`<!DOCTYPE html>` + "\n" + `<html><head><meta charset="utf-8"></head><body><a class=k>x</a><img src=a.png></body></html>`},
		{`<html><head></head><body><iframe srcdoc="<script>x()</script>" src=f.html></iframe><svg><script/></svg></body></html>`,
			`<!DOCTYPE html>` + "\n" + `<html><head><meta charset="utf-8"></head><body><iframe src=f.html></iframe><svg></svg></body></html>`},
		{`<html><head><title>if (a < b) {}</title></head><body><p>&lt;script&gt; stays text</p></body></html>`,
			`<!DOCTYPE html>` + "\n" + `<html><head><meta charset="utf-8"><title>if (a < b) {}</title></head><body><p>&lt;script&gt; stays text</p></body></html>`},
	} {
		if got := string(offlineDOM([]byte(c.in))); got != c.want {
			t.Errorf("offlineDOM(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
	}
}

// TestMergeAndNewestSubresources: a URL fetched as a page by one store and as a sub-resource
// by another is both after Merge, neither superseding the other, while sub-resources of one
// URL supersede each other across stores as pages do; Newest keeps each one's newest visit.
func TestMergeAndNewestSubresources(t *testing.T) {
	a := store("http://x/data.json@1", "http://cdn/f.css@2")
	b := store("http://x/data.json@5", "http://cdn/f.css@6")
	b.pages[0].Subresource, b.pages[1].Subresource, a.pages[1].Subresource = true, true, true
	m, err := Merge(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := list(t, m.Pages), "http://x/data.json@1#2 http://x/data.json@5#3 http://cdn/f.css@6#5"; got != want {
		t.Errorf("merged %s\nwant %s", got, want)
	}
	if m.Superseded() != 1 {
		t.Errorf("%d superseded, want 1 (store a's f.css)", m.Superseded())
	}
	n := NewNewest(context.Background(), m.PagesMeta, m.Pages, m.Page)
	if got, want := list(t, n.Pages), "http://x/data.json@1#2 http://x/data.json@5#3 http://cdn/f.css@6#5"; got != want || n.Older() != 0 {
		t.Errorf("newest %s (%d older)\nwant %s", got, n.Older(), want)
	}
}

// TestWARCRenderedRevisit: a rendered revisit whose body is the same as an earlier one's is a
// revisit record, and its DOM's conversion record refers to that revisit record.
func TestWARCRenderedRevisit(t *testing.T) {
	first := renderedSite()[0]
	again := *first
	again.Seq, again.SameAs, again.FetchedAt = 5, 1, first.FetchedAt.Add(time.Hour)
	again.Rendered = []byte("<html><head></head><body>later</body></html>")
	w, err := NewWARC(filepath.Join(t.TempDir(), "r"), &WARCOptions{Date: time.Now(), Rand: seededReader(testSeed)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), sliceSource([]*storage.Page{first, &again}), w, nil); err != nil {
		t.Fatal(err)
	}
	recs := readRawWARC(t, w.Files()[0])
	if len(recs) != 7 || recs[5].get("WARC-Type") != "revisit" || recs[6].get("WARC-Type") != "conversion" ||
		recs[6].get("WARC-Refers-To") != recs[5].get("WARC-Record-ID") || string(recs[6].block) != string(again.Rendered) {
		for _, r := range recs {
			t.Logf("%s %s refers to %s", r.get("WARC-Type"), r.get("WARC-Record-ID"), r.get("WARC-Refers-To"))
		}
		t.Fatal("want request, revisit, conversion of the revisit's DOM referring to the revisit")
	}
}
