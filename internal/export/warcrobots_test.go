package export

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/storage"
)

// TestRunWARCRobots: RunWARC writes the pages, then the robots.txt responses the filter
// matches, each as a request/response pair, and counts them apart.
func TestRunWARCRobots(t *testing.T) {
	robotsTxt := func(host, body string) *storage.Page {
		u := "http://" + host + "/robots.txt"
		return &storage.Page{
			URL: u, FinalURL: u, Status: 200, StatusLine: "HTTP/1.1 200 OK", Proto: "HTTP/1.1",
			Header: http.Header{"Content-Type": {"text/plain"}}, ReqHeader: http.Header{"User-Agent": {"crawl-test"}},
			ReqMethod: "GET", FetchedAt: baseTime, RemoteAddr: "192.0.2.7:80", Body: []byte(body),
		}
	}
	pages := syntheticPages()[:2]
	robots := []*storage.Page{robotsTxt("a.example", "User-agent: *\nDisallow: /a\n"), robotsTxt("b.example", "User-agent: *\nDisallow: /b\n")}
	f, err := NewFilter([]string{"a.example"}, "", baseTime.Add(-1))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "x.warc.gz")
	w, err := NewWARC(out, &WARCOptions{Date: baseTime, Rand: seededReader(testSeed)})
	if err != nil {
		t.Fatal(err)
	}
	st, err := RunWARC(context.Background(), sliceSource(pages), sliceSource(robots), w, f)
	if err != nil {
		t.Fatal(err)
	}
	recs := readRawWARC(t, out)
	var pageTargets []string
	for _, p := range pages {
		if f.Match(p) {
			pageTargets = append(pageTargets, targetURI(pageURL(p)))
		}
	}
	if st.Robots != 1 || st.Pages != int64(len(pageTargets)) || len(recs) != 1+2*(len(pageTargets)+1) {
		t.Fatalf("stats %+v, %d records; want %d pages and 1 robots.txt", st, len(recs), len(pageTargets))
	}
	req, resp := recs[len(recs)-2], recs[len(recs)-1]
	if req.get("WARC-Type") != "request" || resp.get("WARC-Type") != "response" ||
		req.get("WARC-Target-URI") != "http://a.example/robots.txt" || resp.get("WARC-Concurrent-To") != req.get("WARC-Record-ID") ||
		resp.get("WARC-IP-Address") != "192.0.2.7" || !strings.HasSuffix(string(resp.block), "\r\n\r\nUser-agent: *\nDisallow: /a\n") {
		t.Errorf("last pair: %v %q / %v %q", req.fields, req.block, resp.fields, resp.block)
	}
}
