package export

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/crawl-project/crawl/storage"
)

// testSeed pins the randomness of the synthetic pages and record IDs.
const testSeed = 20240501

var baseTime = time.Date(2024, 5, 1, 12, 30, 45, 123456789, time.UTC)

// seededReader is a deterministic randomness source for record IDs.
func seededReader(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	return rand.NewChaCha8(s)
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

// syntheticPages is the fixture of the round-trip tests: bodies, a redirect, a 404, binary and
// truncated bodies, a removed Content-Encoding, HTTP/2, IPv6, non-ASCII URLs and a header value
// trying to inject a line.
func syntheticPages() []*storage.Page {
	r := rand.New(rand.NewPCG(testSeed, 1))
	req := func() http.Header {
		return http.Header{
			"User-Agent":      {"crawl-test/1.0 (+http://127.0.0.1/bot)"},
			"Accept-Encoding": {"gzip, br, zstd"},
			"Accept":          {"*/*"},
		}
	}
	binary := randBytes(r, 3000)
	copy(binary[100:], "\r\n\r\nHTTP/1.1 200 OK\r\n") // record-looking bytes inside a body
	big := bytes.Repeat([]byte("<p>lorem ipsum dolor sit amet</p>\n"), 2000)
	pages := []*storage.Page{
		{
			URL: "http://a.example/", FinalURL: "http://a.example/", Status: 200,
			StatusLine: "HTTP/1.1 200 OK", Proto: "HTTP/1.1",
			Header: http.Header{
				"Content-Type":     {"text/html; charset=utf-8"},
				"Content-Encoding": {"gzip"},
				"Content-Length":   {"1234"},
				"Vary":             {"Accept-Encoding"},
				"Set-Cookie":       {"a=1; Path=/", "b=2; Path=/"},
			},
			ReqHeader: req(), ReqMethod: "GET",
			FetchedAt: baseTime, Duration: 12345 * time.Microsecond,
			ContentType: "text/html", DecodedFrom: "gzip", RemoteAddr: "127.0.0.1:8080",
			Body: []byte("<!doctype html><title>héllo</title><a href=/b>b</a>"),
		},
		{
			URL: "http://a.example/old", FinalURL: "http://a.example/old", Status: 301,
			StatusLine: "HTTP/1.1 301 Moved Permanently", Proto: "HTTP/1.1",
			Header:    http.Header{"Location": {"/new"}, "Content-Length": {"0"}},
			ReqHeader: req(), ReqMethod: "GET",
			FetchedAt: baseTime.Add(time.Second), Duration: 3 * time.Millisecond,
			Depth: 1, Parent: "http://a.example/", RemoteAddr: "127.0.0.1:8080",
		},
		{
			URL: "http://a.example/missing", FinalURL: "http://a.example/missing", Status: 404,
			StatusLine: "HTTP/1.1 404 Not Found", Proto: "HTTP/1.1",
			Header:    http.Header{"Content-Type": {"text/plain"}, "Transfer-Encoding": {"chunked"}},
			ReqHeader: req(), ReqMethod: "GET",
			FetchedAt: baseTime.Add(2 * time.Second), Duration: time.Millisecond,
			Depth: 1, Parent: "http://a.example/", ContentType: "text/plain",
			RemoteAddr: "127.0.0.1:8080",
			Body:       []byte("not found\n"),
		},
		{
			URL: "https://b.example:8443/img.png", FinalURL: "https://b.example:8443/img.png", Status: 200,
			StatusLine: "HTTP/2.0 200 OK", Proto: "HTTP/2.0",
			Header:    http.Header{"Content-Type": {"image/png"}, "X-Evil": {"x\r\nInjected: yes"}},
			ReqHeader: req(), ReqMethod: "GET",
			FetchedAt: baseTime.Add(3 * time.Second), Duration: 40 * time.Millisecond,
			Depth: 2, Parent: "http://a.example/", ContentType: "image/png",
			RemoteAddr: "[::1]:8443",
			Body:       binary,
		},
		{
			URL: "http://a.example/big", FinalURL: "http://a.example/big", Status: 200,
			StatusLine: "HTTP/1.1 200 OK", Proto: "HTTP/1.1",
			Header:    http.Header{"Content-Type": {"text/html"}, "Content-Encoding": {"br"}},
			ReqHeader: req(), ReqMethod: "GET",
			FetchedAt: baseTime.Add(4 * time.Second), Duration: 80 * time.Millisecond,
			Depth: 1, Parent: "http://a.example/", ContentType: "text/html",
			Truncated: true, DecodedFrom: "br",
			Body: big[:50000],
		},
		{
			// Normalized form of http://bücher.example/straße?q=ü
			URL: "http://xn--bcher-kva.example/stra%C3%9Fe?q=%C3%BC", FinalURL: "http://xn--bcher-kva.example/stra%C3%9Fe?q=%C3%BC",
			Status: 200, Proto: "HTTP/1.1", // no StatusLine: rebuilt from Status
			Header:    http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
			ReqHeader: req(), ReqMethod: "GET",
			FetchedAt: baseTime.Add(5 * time.Second), ContentType: "text/plain",
			Body: []byte("Straße über Bücher ✓"),
		},
		{
			// Not normalized: raw Unicode in host and path must still give a valid WARC-Target-URI.
			URL: "http://bücher.example/größe", FinalURL: "http://bücher.example/größe", Status: 200,
			StatusLine: "HTTP/1.1 200 OK", Proto: "HTTP/1.1",
			Header:      http.Header{"Content-Type": {"text/plain; charset=iso-8859-1"}},
			ReqHeader:   req(),
			FetchedAt:   baseTime.Add(6 * time.Second),
			ContentType: "text/plain",
			Body:        []byte("gr\xf6\xdfe"), // Latin-1: not UTF-8
		},
		{
			URL: "http://a.example/empty", FinalURL: "http://a.example/empty", Status: 204,
			StatusLine: "HTTP/1.1 204 No Content", Proto: "HTTP/1.1",
			ReqHeader: req(), ReqMethod: "GET", FetchedAt: baseTime.Add(7 * time.Second),
		},
	}
	for i, p := range pages {
		p.Seq = uint64(i + 1)
	}
	return pages
}

// sliceSource is a Source over pages in memory.
func sliceSource(pages []*storage.Page) Source {
	return func(fn func(p *storage.Page) error) error {
		for _, p := range pages {
			if err := fn(p); err != nil {
				return err
			}
		}
		return nil
	}
}

// generatedSource makes n small pages on the fly, so that memory use reflects the writer only.
func generatedSource(n int) Source {
	return func(fn func(p *storage.Page) error) error {
		r := rand.New(rand.NewPCG(testSeed, 2))
		hdr := http.Header{"Content-Type": {"text/html; charset=utf-8"}, "Server": {"simweb"}}
		req := http.Header{"User-Agent": {"crawl-bench"}, "Accept-Encoding": {"gzip"}}
		for i := range n {
			body := fmt.Appendf(nil, "<!doctype html><title>page %d</title><p>%x</p>", i, r.Uint64())
			body = append(body, bytes.Repeat([]byte("<a href=/x>link</a>\n"), 20+r.IntN(40))...)
			p := &storage.Page{
				Seq: uint64(i + 1), URL: fmt.Sprintf("http://h%d.example/p/%d", i%50, i),
				Status: 200, StatusLine: "HTTP/1.1 200 OK", Proto: "HTTP/1.1",
				Header: hdr, ReqHeader: req, ReqMethod: "GET",
				FetchedAt: baseTime.Add(time.Duration(i) * time.Millisecond), Duration: time.Millisecond,
				Depth: i % 5, ContentType: "text/html", RemoteAddr: "127.0.0.1:8080", Body: body,
			}
			p.FinalURL = p.URL
			if err := fn(p); err != nil {
				return err
			}
		}
		return nil
	}
}
