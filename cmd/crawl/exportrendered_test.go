package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/crawl-project/crawl/storage"
)

// renderedStore writes a store as a rendering crawl leaves it: a page fetched as a page
// (/data.json), a rendered shell whose DOM the browser built from it, and the shell's two
// sub-resources, one of them /data.json again, fetched later for the browser.
func renderedStore(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	db, err := storage.Open(dir, &storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	page := func(u, ctype, body string) *storage.Page {
		at = at.Add(time.Second)
		return &storage.Page{URL: u, FinalURL: u, Status: 200, StatusLine: "HTTP/1.1 200 OK", Proto: "HTTP/1.1", ReqMethod: "GET",
			FetchedAt: at, Header: http.Header{"Content-Type": {ctype}}, ContentType: ctype, Body: []byte(body)}
	}
	data := page("http://127.0.0.1:1/data.json", "application/json", `{"v":1}`)
	shell := page("http://127.0.0.1:1/", "text/html", `<title>Loading…</title><script src=/app.js></script>`)
	shell.Render = &storage.RenderInfo{Requests: 2, Took: time.Second}
	shell.Rendered = []byte(`<html><head><title>Shop</title><script src="/app.js"></script></head><body><h1 class=x>Hats</h1></body></html>`)
	app := page("http://127.0.0.1:1/app.js", "application/javascript", `fetch("/data.json")`)
	again := page("http://127.0.0.1:1/data.json", "application/json", `{"v":2}`)
	for _, s := range []*storage.Page{app, again} {
		s.Subresource, s.Parent = true, shell.URL
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, p := range []*storage.Page{data, shell, app, again} {
			if _, err := storage.PutPage(tx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExportRendered: crawl export reads a rendered page's DOM for --field, says "rendered",
// leaves sub-resources out of JSON Lines and CSV unless --subresources and says how many, picks
// --latest among pages only, and counts sub-resources apart in WARC and the mirror, whose file
// of the page is its DOM without its script.
func TestExportRendered(t *testing.T) {
	dir := renderedStore(t)
	export := func(args ...string) (string, string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out")
		var stdout, stderr strings.Builder
		args = append([]string{"--data", dir, "--out", out}, args...)
		if code := exportCmd(args, &stdout, &stderr); code != exitOK {
			t.Fatalf("crawl export %q: exit %d\n%s", args, code, stderr.String())
		}
		return out, stderr.String()
	}
	lines := func(file string) map[string][]map[string]any {
		t.Helper()
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m := map[string][]map[string]any{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var l map[string]any
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatal(err)
			}
			m[l["url"].(string)] = append(m[l["url"].(string)], l)
		}
		return m
	}
	for _, args := range [][]string{{}, {"--no-body"}, {"--latest"}} {
		out, said := export(append([]string{"--format", "jsonl", "--field", "h1=h1.x"}, args...)...)
		got := lines(out)
		home := got["http://127.0.0.1:1/"]
		if len(got) != 2 || len(home) != 1 || home[0]["title"] != "Shop" || home[0]["rendered"] != true ||
			home[0]["fields"].(map[string]any)["h1"] != "Hats" {
			t.Errorf("jsonl %q: lines %v", args, got)
		}
		if d := got["http://127.0.0.1:1/data.json"]; len(d) != 1 || d[0]["subresource"] != nil || (len(args) == 0 && d[0]["body"] != `{"v":1}`) {
			t.Errorf("jsonl %q: /data.json lines %v; want the page's only", args, d)
		}
		if !strings.Contains(said, "2 pages written (0 filtered out, 2 sub-resources of rendered pages (--subresources writes them))") {
			t.Errorf("jsonl %q said %q", args, said)
		}
	}
	out, said := export("--format", "jsonl", "--subresources")
	if got := lines(out); len(got["http://127.0.0.1:1/data.json"]) != 2 || got["http://127.0.0.1:1/app.js"][0]["subresource"] != true ||
		!strings.Contains(said, "2 pages, 2 sub-resources of rendered pages written") {
		t.Errorf("jsonl --subresources: %v\n%s", got, said)
	}
	out, _ = export("--format", "csv", "--field", "h1=h1")
	if b, _ := os.ReadFile(out); string(b) != "url,h1\nhttp://127.0.0.1:1/,Hats\n" {
		t.Errorf("csv:\n%s", b)
	}
	if _, said = export("--format", "warc"); !strings.Contains(said, "2 pages, 2 sub-resources of rendered pages written") {
		t.Errorf("warc said %q", said)
	}
	out, said = export("--format", "mirror")
	b, err := os.ReadFile(filepath.Join(out, "127.0.0.1+1", "index.html"))
	if err != nil || !strings.Contains(string(b), "<h1 class=x>Hats</h1>") || strings.Contains(string(b), "<script") {
		t.Errorf("mirror: the page's file %q, %v; want its DOM without its script", b, err)
	}
	// /data.json's file is its latest version: the one the browser was given.
	if !strings.Contains(said, "1 pages, 2 sub-resources of rendered pages written") {
		t.Errorf("mirror said %q", said)
	}
	var stderr strings.Builder
	if code := exportCmd([]string{"--data", dir, "--out", "x", "--format", "warc", "--subresources"}, &stderr, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "--subresources applies to --format jsonl and csv only") {
		t.Errorf("--subresources with warc: exit %d, %q", code, stderr.String())
	}
}
