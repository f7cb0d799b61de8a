// Command renderedstore writes a crawl store of rendered pages, stored by hand as a rendering
// crawl stores them (the rendered DOM beside the body, each sub-resource a page of its own),
// for .ci/warc-validate to export and check without a browser.
//
//	go run ./.ci/renderedstore DIR
package main

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"go.etcd.io/bbolt"

	"github.com/crawl-project/crawl/storage"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: renderedstore DIR")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "renderedstore:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	db, err := storage.Open(dir, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	page := func(u, ctype, body string) *storage.Page {
		at = at.Add(time.Second)
		return &storage.Page{URL: u, FinalURL: u, Status: 200, StatusLine: "HTTP/1.1 200 OK", Proto: "HTTP/1.1",
			ReqMethod: "GET", ReqHeader: http.Header{"User-Agent": {"crawl-ci"}}, FetchedAt: at, Duration: 15 * time.Millisecond,
			Header: http.Header{"Content-Type": {ctype}}, ContentType: ctype, RemoteAddr: "127.0.0.1:8080", Body: []byte(body)}
	}
	var pages []*storage.Page
	for i := range 3 {
		u := fmt.Sprintf("http://127.0.0.1:8080/p%d", i)
		shell := page(u, "text/html", `<!doctype html><title>Loading…</title><script src="/app.js"></script><div id=app>Loading…</div>`)
		shell.Render = &storage.RenderInfo{Cut: storage.RenderCut(i % 2), Requests: 3, Bytes: 300, Took: time.Second}
		shell.Rendered = []byte(fmt.Sprintf(`<html><head><title>Page %d</title><script src="/app.js"></script></head>`+
			`<body><div id="app"><h1>Item %d</h1><img src="http://127.0.0.2:8081/logo.png"></div></body></html>`, i, i))
		pages = append(pages, shell)
		subs := []*storage.Page{page(fmt.Sprintf("http://127.0.0.3:8082/items?page=%d", i), "application/json", fmt.Sprintf(`{"item":%d}`, i))}
		if i == 0 { // fetched once, then answered from the store
			subs = append(subs, page("http://127.0.0.1:8080/app.js", "application/javascript", `fetch("http://127.0.0.3:8082/items")`))
		}
		for _, s := range subs {
			s.Subresource, s.Parent, s.Depth = true, u, 1
			pages = append(pages, s)
		}
	}
	logo := page("http://127.0.0.2:8081/logo.png", "image/png", "\x89PNG\r\n\x1a\nnot really")
	logo.Subresource, logo.Parent = true, pages[0].URL
	pages = append(pages, logo)
	return db.Update(func(tx *bbolt.Tx) error {
		for _, p := range pages {
			if _, err := storage.PutPage(tx, p); err != nil {
				return err
			}
		}
		return nil
	})
}
