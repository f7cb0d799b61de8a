//go:build linux

package render

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// benchAssets are the sub-resources of the benchmark's page, answered from memory.
var benchAssets = map[string]*Response{
	"/style.css": {Status: 200, Header: http.Header{"Content-Type": {"text/css"}}, Body: []byte(strings.Repeat("p { color: #333 }\n", 200))},
	"/app.js": {Status: 200, Header: http.Header{"Content-Type": {"text/javascript"}}, Body: []byte(`
fetch('/api/items').then(r => r.json()).then(items => {
  const ul = document.getElementById('items');
  for (const it of items) { const li = document.createElement('li'); li.textContent = it; ul.appendChild(li); }
});`)},
	"/api/items": {Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`["one","two","three","four"]`)},
	"/a.png":     {Status: 200, Header: http.Header{"Content-Type": {"image/png"}}, Body: make([]byte, 2000)},
	"/b.png":     {Status: 200, Header: http.Header{"Content-Type": {"image/png"}}, Body: make([]byte, 2000)},
}

const benchPage = `<!DOCTYPE html><html><head><title>Bench</title><link rel="stylesheet" href="/style.css">
<script src="/app.js" defer></script></head><body><h1>Items</h1><ul id="items"></ul>
<img src="/a.png"><img src="/b.png"><p>` + "Some text. " + `</p></body></html>`

// BenchmarkRender renders a page with five sub-requests (a stylesheet, a script, the XHR it
// makes, two images) answered from memory, Tabs pages at once, with the default quiet time
// (500ms), and reports pages/s, the CPU time of the browser's process tree and of this
// process per page, and the browser's memory (the sum of its processes' proportional set
// sizes, the largest seen after a page).
func BenchmarkRender(b *testing.B) {
	for _, tabs := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("tabs=%d", tabs), func(b *testing.B) { benchRender(b, tabs) })
	}
}

func benchRender(b *testing.B, tabs int) {
	br := startBrowser(b, Options{Tabs: tabs})
	pid := br.running().pid
	a := AnswererFunc(func(ctx context.Context, r *Request) (*Response, error) {
		i := strings.Index(r.URL[len("http://bench.test"):], "?")
		path := r.URL[len("http://bench.test"):]
		if i >= 0 {
			path = path[:i]
		}
		if resp, ok := benchAssets[path]; ok {
			return resp, nil
		}
		return nil, errors.New("not found")
	})
	doc := htmlDoc(benchPage)
	render(b, br, "http://bench.test/warm", doc, a) // the first page pays for the browser's start
	var peak atomic.Int64
	_, cpu0 := treeUsage(pid)
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range tabs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for int(next.Add(1)) <= b.N {
				res, err := br.Render(context.Background(), "http://bench.test/p", doc, a)
				if err != nil {
					b.Error(err)
					return
				}
				if res.Requests != 5 || !strings.Contains(string(res.DOM), "<li>four</li>") {
					b.Errorf("requests %d, DOM %s", res.Requests, res.DOM)
				}
				if next.Load()%10 == 0 { // reading the memory of the tree costs a few ms
					if rss, _ := treeUsage(pid); rss > peak.Load() {
						peak.Store(rss)
					}
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	b.StopTimer()
	_, cpu1 := treeUsage(pid)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	self := time.Duration(syscall.TimevalToNsec(ru1.Utime)+syscall.TimevalToNsec(ru1.Stime)-
		syscall.TimevalToNsec(ru0.Utime)-syscall.TimevalToNsec(ru0.Stime)) * time.Nanosecond
	n := float64(b.N)
	b.ReportMetric(n/took.Seconds(), "pages/s")
	b.ReportMetric(float64((cpu1-cpu0).Milliseconds())/n, "browser-cpu-ms/page")
	b.ReportMetric(float64(self.Milliseconds())/n, "go-cpu-ms/page")
	b.ReportMetric(float64(peak.Load())/(1<<20), "browser-pss-MiB")
}
