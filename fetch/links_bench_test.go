package fetch

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/simweb"
)

// simwebPages returns up to n pages of a simulated host whose pages carry about text bytes of
// text each (0: simweb's 1–4 KB) and links links (0: simweb's few), with their URLs.
func simwebPages(tb testing.TB, n, text, links int) ([]*url.URL, [][]byte) {
	tb.Helper()
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: n, TextSize: text, Links: links}}, &simweb.Options{Seed: 1})
	if err != nil {
		tb.Fatal(err)
	}
	defer web.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var urls []*url.URL
	var bodies [][]byte
	for _, u := range web.Expected()["a"] {
		resp, err := client.Get(u)
		if err != nil {
			tb.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			tb.Fatal(err)
		}
		urls = append(urls, mustURL(tb, u))
		bodies = append(bodies, body)
	}
	return urls, bodies
}

// BenchmarkExtractLinks reads 12 KB simulated pages (the two-host throughput bench's), with
// simweb's few links and with 40 and 150 (the link-rich bench's).
func BenchmarkExtractLinks(b *testing.B) {
	for _, n := range []int{0, 40, 150} {
		b.Run(fmt.Sprintf("links=%d", n), func(b *testing.B) { benchExtractLinks(b, n) })
	}
}

func benchExtractLinks(b *testing.B, n int) {
	urls, bodies := simwebPages(b, 64, 12*1024-700, n)
	size := 0
	for _, body := range bodies {
		size += len(body)
	}
	b.SetBytes(int64(size / len(bodies)))
	b.ReportAllocs()
	i, links := 0, 0
	for b.Loop() {
		k := i % len(bodies)
		i++
		links += len(ExtractLinks(urls[k], nil, "text/html", bodies[k], "crawl").Links)
	}
	b.ReportMetric(float64(links)/float64(i), "links/op")
}
