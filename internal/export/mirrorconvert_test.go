package export

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/internal/mirrorcheck"
	"github.com/crawl-project/crawl/storage"
)

// sitePages is a small site as the crawler stores it: pages, a stylesheet with a query, an
// image, a redirect chain, a 404, a Latin-1 page and a page fetched twice.
func sitePages() []*storage.Page {
	var pages []*storage.Page
	add := func(u string, status int, ct, body string, hdr ...string) {
		h := http.Header{}
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			h.Set(hdr[i], hdr[i+1])
		}
		mt, _, _ := strings.Cut(ct, ";")
		pages = append(pages, &storage.Page{Seq: uint64(len(pages) + 1), URL: u, FinalURL: u, Status: status,
			Header: h, ContentType: mt, FetchedAt: baseTime, Body: []byte(body)})
	}
	add("http://s.test/", 200, "text/html", `<!DOCTYPE html><html><head>`+
		`<link rel=stylesheet href="/s?v=2"><link rel="icon" href='/favicon.ico'></head><body>`+
		`<a href="/docs/">docs</a> <a href=/old>old</a> <a href="/gone">gone</a> <a href="/docs/#top">top</a>`+
		`<img src="img.png" srcset="/img.png 1x, /img.png?big 2x"><a href="mailto:x@s.test">m</a>`+
		`<a href="/not-crawled?a=1&amp;b=2">nc</a><a href="http://other.test/">o</a><a href="#here">h</a></body></html>`)
	add("http://s.test/s?v=2", 200, "text/css", `@import "/gone"; body{color:red;background:url( img.png )} /* url(x.png) */`)
	add("http://s.test/favicon.ico", 200, "image/x-icon", "ICO")
	add("http://s.test/old", 301, "text/html", "<h1>301 Moved Permanently</h1>", "Location", "/older")
	add("http://s.test/older", 302, "", "", "Location", "http://s.test/docs/")
	add("http://s.test/gone", 404, "text/html", "<h1>404</h1>")
	add("http://s.test/img.png", 200, "image/png", "PNG")
	add("http://s.test/img.png?big", 200, "image/png", "BIGPNG")
	add("http://s.test/docs/", 200, "text/html", `<html><head><base href="/docs/x/"><style>b{background:url(/img.png)}</style></head><body>`+
		`<a href="../../">home</a><a href="l1" style='background:url("../../img.png?big")'>latin</a></body></html>`)
	add("http://s.test/docs/x/l1", 200, "text/html; charset=iso-8859-1", "<html><head><title>caf\xe9</title></head><body><a href=\"/\">\xe9</a></body></html>")
	add("http://s.test/docs/x/l1", 200, "text/html; charset=iso-8859-1", "<html><head><title>caf\xe9 2</title></head><body><a href=\"/\">\xe9</a></body></html>")
	return pages
}

func TestMirrorConvertLinks(t *testing.T) {
	pages := sitePages()
	root, files := mirrorTreeN(t, pages, len(files0(pages)))
	for name, want := range map[string]string{
		"s.test/index.html": `<!DOCTYPE html><html><head>` +
			`<link rel=stylesheet href="s~` + shortHash("?v=2", 10) + `.css"><link rel="icon" href="favicon.ico"></head><body>` +
			`<a href="docs/index.html">docs</a> <a href="docs/index.html">old</a> <a href="http://s.test/gone">gone</a> <a href="docs/index.html#top">top</a>` +
			`<img src="img.png" srcset="img.png 1x, img~` + shortHash("?big", 10) + `.png 2x"><a href="mailto:x@s.test">m</a>` +
			`<a href="http://s.test/not-crawled?a=1&amp;b=2">nc</a><a href="http://other.test/">o</a><a href="#here">h</a></body></html>`,
		"s.test/s~" + shortHash("?v=2", 10) + ".css": `@import "http://s.test/gone"; body{color:red;background:url( img.png )} /* url(x.png) */`, // img.png: already right
		"s.test/docs/index.html": `<html><head><base href="index.html"><style>b{background:url("../img.png")}</style></head><body>` +
			`<a href="../index.html">home</a><a href="x/l1.html" style="background:url(&#34;../img~` + shortHash("?big", 10) + `.png&#34;)">latin</a></body></html>`,
		// The latest version, its bytes kept, its charset declared for a reader without headers.
		"s.test/docs/x/l1.html": "<html><head><meta charset=\"iso-8859-1\"><title>caf\xe9 2</title></head><body><a href=\"../../index.html\">\xe9</a></body></html>",
	} {
		if got, ok := files[name]; !ok || got != want {
			t.Errorf("%s:\n got %q\nwant %q", name, got, want)
		}
	}
	// A link through redirects points at the file the chain ends at (above); each redirect is
	// a refresh page pointing there too; no error body is written.
	if got := files["s.test/old.html"]; !strings.Contains(got, `url=docs/index.html"`) {
		t.Errorf("old.html = %q, want a refresh to docs/index.html", got)
	}
	if got := files["s.test/older.html"]; !strings.Contains(got, `url=docs/index.html"`) {
		t.Errorf("older.html = %q, want a refresh to docs/index.html", got)
	}
	for name, body := range files {
		if strings.Contains(body, "404") || strings.Contains(body, "Moved Permanently") {
			t.Errorf("%s holds an error or redirect body: %q", name, body)
		}
	}
	rep, err := mirrorcheck.Check(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Broken) > 0 || rep.Links < 10 {
		t.Errorf("%d links checked, broken: %q", rep.Links, rep.Broken)
	}
}

// files0 is the number of files sitePages mirrors: 2xx and redirects, one per URL.
func files0(pages []*storage.Page) map[string]bool {
	m := map[string]bool{}
	for _, p := range pages {
		if p.Status < 400 {
			m[p.URL] = true
		}
	}
	return m
}

func TestMirrorKeepLinks(t *testing.T) {
	pages := sitePages()
	root := filepath.Join(t.TempDir(), "m")
	w, err := NewMirror(root, sliceSource(pages), &MirrorOptions{KeepLinks: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(t.Context(), sliceSource(pages), w, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "s.test", "index.html"))
	if err != nil || string(b) != string(pages[0].Body) {
		t.Errorf("index.html = %q, %v; want the stored body", b, err)
	}
}

func TestRewriteSrcset(t *testing.T) {
	up := func(s string) string { return "<" + s + ">" }
	for in, want := range map[string]string{
		"a.png":                        "<a.png>",
		"a.png 1x, b.png 2x":           "<a.png> 1x, <b.png> 2x",
		" a.png,b.png":                 " <a.png,b.png>", // a comma inside a URL is part of it
		"a.png,, b.png":                "<a.png>,, <b.png>",
		"a.png, b,c.png 2x":            "<a.png>, <b,c.png> 2x",
		"a.png 100w (x, y), b.png 2x,": "<a.png> 100w (x, y), <b.png> 2x,",
		"":                             "",
	} {
		if got := rewriteSrcset(in, up); got != want {
			t.Errorf("rewriteSrcset(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRelLink(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{"h/index.html", "h/a.html", "a.html"},
		{"h/a/b.html", "h/index.html", "../index.html"},
		{"h/a/b.html", "h/a/c/d.css", "c/d.css"},
		{"h/index.html", "g+8080/x%3F.png", "../g+8080/x%253F.png"},
		{"h/index.html", "h/café", "caf%C3%A9"},
		{"h/a/index.html", "h/a/index.html", "index.html"},
	} {
		if got := relLink(tc.from, tc.to); got != tc.want {
			t.Errorf("relLink(%q, %q) = %q, want %q", tc.from, tc.to, got, tc.want)
		}
	}
}

// FuzzConvertHTML: rewriting never panics, and a page without URL attributes keeps its bytes.
func FuzzConvertHTML(f *testing.F) {
	f.Add([]byte(`<a href="/x">x</a><img srcset="a 1x, b 2x"><base href=/d/>`))
	f.Add([]byte("<a href='x' href=y\x00 /><script>var a='<a href=z>'</script><!-- <a href=q> -->"))
	f.Add([]byte(`<p title="<a href=x>">t</p><a href=`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p := &storage.Page{Seq: 1, URL: "http://f.test/a/", FinalURL: "http://f.test/a/", Status: 200,
			ContentType: "text/html", Header: http.Header{}, Body: body}
		pl, err := buildPlan(sliceSource([]*storage.Page{p}), nil)
		if err != nil {
			t.Fatal(err)
		}
		m := &MirrorWriter{plan: pl}
		out := m.convertHTML(p, pl.byURL[p.URL].rel)
		if !strings.Contains(string(body), "=") && string(out) != string(body) {
			t.Errorf("a page without attributes changed:\n in %q\nout %q", body, out)
		}
	})
}
