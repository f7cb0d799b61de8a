// Package crawler is the crawl as a Go library: the same loop the crawl command runs, with
// its resume, robots.txt, per-host politeness and export, behind a few types.
//
//	c, err := crawler.New(crawler.Options{Seeds: seeds, DataDir: dir})
//	if err != nil { … }
//	c.OnPage(func(p *crawler.Page) {
//		doc, err := p.Doc() // *goquery.Document, parsed at most once
//		if err == nil { fmt.Println(p.URL, p.Status, doc.Find("title").Text()) }
//	})
//	err = c.Run(ctx) // returns when nothing in scope is left, or ctx ends (then resumable)
//
// Everything the crawl learns and fetches is kept in DataDir (a bbolt store): a Run that ends
// early, by its context or by a crash, is resumed by the next Run on the same DataDir, which
// fetches nothing twice. What is stored can be exported with the crawl command (crawl export
// --data DIR …) or read with package storage.
//
// Politeness is not optional: each host's robots.txt is obeyed (RFC 9309), and each host's rate
// is learned from its answers (429/503, Retry-After, latency) and kept just under the limit
// it shows. Options only cap it.
//
// With Options.Redis, a Crawler is one worker of a crawl shared through Redis (or a Redis
// Cluster) by any number of processes: each host is crawled by one worker at a time.
//
// A program that keeps its own loop can still borrow the politeness: hostlimit.NewTransport
// wraps an http.RoundTripper with the same per-host gates.
//
// # Stability
//
// The package follows semantic versioning from v1: until then, exported names may still change
// between minor versions, and each change is listed in the release notes. Fields added to
// Options and Page keep the zero value's meaning, so a program that sets only what it needs
// keeps compiling and behaving the same.
package crawler
