package crawler_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/crawl-project/crawl/crawler"
)

// site serves a small site on loopback: / links to /a, /b and /private/c.
func site() *httptest.Server {
	pages := map[string]string{
		"/":          `<title>Home</title><a href="/a">a</a> <a href="/b">b</a> <a href="/private/c">c</a>`,
		"/a":         `<title>Page A</title><h1>A</h1><a href="/">home</a>`,
		"/b":         `<title>Page B</title><h1>B</h1>`,
		"/private/c": `<title>Page C</title>`,
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, body)
	}))
}

// tempDir makes a data directory for an example.
func tempDir() string {
	dir, err := os.MkdirTemp("", "crawler-example-")
	if err != nil {
		log.Fatal(err)
	}
	return dir
}

// A crawl of a site, printing each page's title. Run again on the same DataDir, it resumes.
func Example() {
	srv := site()
	defer srv.Close()
	dir := tempDir()
	defer os.RemoveAll(dir)

	c, err := crawler.New(crawler.Options{Seeds: []string{srv.URL + "/"}, DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	var titles []string
	c.OnPage(func(p *crawler.Page) {
		doc, err := p.Doc()
		if err == nil && p.Status == 200 {
			mu.Lock()
			titles = append(titles, doc.Find("title").Text())
			mu.Unlock()
		}
	})
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	slices.Sort(titles)
	fmt.Println(strings.Join(titles, ", "))
	// Output: Home, Page A, Page B, Page C
}

// Scope as a function: only URLs the function admits are queued.
func ExampleOptions_inScope() {
	srv := site()
	defer srv.Close()
	dir := tempDir()
	defer os.RemoveAll(dir)

	c, err := crawler.New(crawler.Options{
		Seeds:   []string{srv.URL + "/"},
		DataDir: dir,
		InScope: func(u *url.URL) bool { return !strings.HasPrefix(u.Path, "/private/") },
	})
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	var paths []string
	c.OnPage(func(p *crawler.Page) {
		u, _ := url.Parse(p.URL)
		mu.Lock()
		paths = append(paths, u.Path)
		mu.Unlock()
	})
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	slices.Sort(paths)
	fmt.Println(paths)
	// Output: [/ /a /b]
}

// A hook on each link found: drop the links you do not want.
func ExampleCrawler_OnLink() {
	srv := site()
	defer srv.Close()
	dir := tempDir()
	defer os.RemoveAll(dir)

	c, err := crawler.New(crawler.Options{Seeds: []string{srv.URL + "/"}, DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	c.OnLink(func(l *crawler.Link) bool { return l.URL.Path != "/b" })
	fetched := 0
	c.OnPage(func(*crawler.Page) { fetched++ }) // hooks are called one at a time
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println(fetched, "pages")
	// Output: 3 pages
}

// Events for metrics: count requests by status.
func ExampleCrawler_OnEvent() {
	srv := site()
	defer srv.Close()
	dir := tempDir()
	defer os.RemoveAll(dir)

	c, err := crawler.New(crawler.Options{Seeds: []string{srv.URL + "/"}, DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	byStatus := map[int]int{}
	c.OnEvent(func(e crawler.Event) {
		if e.Kind == crawler.EventRequest {
			byStatus[e.Status]++
		}
	})
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println(byStatus) // the robots.txt answered 404
	// Output: map[200:4 404:1]
}

// Per-host options: cap one host's rate below what the crawl would learn.
func ExampleOptions_hosts() {
	srv := site()
	defer srv.Close()
	dir := tempDir()
	defer os.RemoveAll(dir)

	host := strings.TrimPrefix(srv.URL, "http://")
	c, err := crawler.New(crawler.Options{
		Seeds:   []string{srv.URL + "/"},
		DataDir: dir,
		Hosts:   map[string]crawler.HostOptions{host: {MaxRate: 5, MaxConcurrency: 1}},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("done")
	// Output: done
}

// Several processes, on one machine or many, share one crawl through Redis (or a Redis
// Cluster, given any one node): each is a Crawler with its own DataDir and the same Redis and
// Crawl. Each host is crawled by one worker at a time; Run returns when the whole crawl is
// done. (Not run by go test: it needs a Redis server.)
func ExampleOptions_redis() {
	c, err := crawler.New(crawler.Options{
		Seeds:   []string{"https://docs.example.com/"}, // any worker may add seeds
		DataDir: "/var/crawl/worker-1",                 // this worker's pages
		Redis:   "redis://redis.internal:6379/0",
		Crawl:   "docs",
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
