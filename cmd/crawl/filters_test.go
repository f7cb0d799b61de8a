package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAcceptTypeAndDenyExt: with --accept-type text/html a page of another type is excluded
// as type after its headers, its body unread; with --deny-ext pdf a .pdf link is excluded as
// filter and never requested. A resume that widens --accept-type fetches the page it excluded.
func TestAcceptTypeAndDenyExt(t *testing.T) {
	t.Parallel()
	const bigSize = 64 << 20
	var bigSent, pdfRequests atomic.Int64
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(`<a href="/big.bin">big</a> <a href="/Doc.PDF">doc</a> <a href="/page">page</a>`))
		case "/page":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte("<title>page</title>"))
		case "/big.bin":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", "67108864")
			chunk := make([]byte, 32<<10)
			for sent := 0; sent < bigSize; sent += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				bigSent.Add(int64(len(chunk)))
			}
		case "/Doc.PDF":
			pdfRequests.Add(1)
			w.Header().Set("Content-Type", "application/pdf")
			w.Write([]byte("%PDF-1.4"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer site.Close()

	dir := filepath.Join(t.TempDir(), "data")
	code, out, errOut := crawlCmd(t, "", "run", site.URL+"/", "--data", dir, "--quiet", "--max-body", "128M",
		"--accept-type", "text/html", "--deny-ext", ".pdf,iso")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if st := urlState(t, dir, site.URL+"/big.bin"); st.State != "excluded" || st.Reason != "type" || !strings.Contains(st.Detail, "application/octet-stream") {
		t.Errorf("big.bin: %+v, want excluded type naming application/octet-stream", st)
	}
	if n := bigSent.Load(); n >= bigSize {
		t.Errorf("the server sent all %d bytes of big.bin: the body was read", n)
	}
	if st := urlState(t, dir, site.URL+"/Doc.PDF"); st.State != "excluded" || st.Reason != "filter" || pdfRequests.Load() != 0 {
		t.Errorf("Doc.PDF: %+v after %d requests, want excluded filter and never requested", st, pdfRequests.Load())
	}
	if st := urlState(t, dir, site.URL+"/page"); st.State != "fetched" {
		t.Errorf("page: %+v, want fetched", st)
	}
	if st := statusJSON(t, dir); st.Settings == nil || strings.Join(st.Settings.AcceptTypes, ",") != "text/html" || strings.Join(st.Settings.DenyExt, ",") != "pdf,iso" {
		t.Errorf("stored settings %+v, want accept-type text/html and deny-ext pdf,iso", st.Settings)
	}

	code, out, errOut = crawlCmd(t, "", "run", "--data", dir, "--quiet", "--max-body", "1M", "--accept-type", "text/*,application/octet-stream")
	if code != exitOK || !strings.Contains(errOut, "re-queued 1 excluded URL (type 1)") {
		t.Fatalf("widened --accept-type: exit %d\n%s%s", code, out, errOut)
	}
	if st := urlState(t, dir, site.URL+"/big.bin"); st.State != "fetched" {
		t.Errorf("big.bin after widening --accept-type: %+v, want fetched", st)
	}
	if st := urlState(t, dir, site.URL+"/Doc.PDF"); st.State != "excluded" || pdfRequests.Load() != 0 {
		t.Errorf("Doc.PDF after the resume: %+v, %d requests; --deny-ext is kept", st, pdfRequests.Load())
	}

	code, _, errOut = crawlCmd(t, "", "run", site.URL+"/", "--data", t.TempDir(), "--accept-type", "html")
	if code != exitUsage || !strings.Contains(errOut, `--accept-type takes media types such as text/html or text/*, not "html"`) {
		t.Errorf("--accept-type html: exit %d, %s", code, errOut)
	}
}

// TestHostsConfig: a --hosts-config file ignores the robots.txt of a host the user owns (not
// even fetched), caps another host's rate, and sends a header to that host only; a bad file is
// a usage error naming the file and what is wrong.
func TestHostsConfig(t *testing.T) {
	t.Parallel()
	var robotsRequests atomic.Int64
	var ownedKey, otherKey atomic.Value
	owned := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			robotsRequests.Add(1)
			fmt.Fprint(w, "User-agent: *\nDisallow: /\n")
			return
		}
		ownedKey.Store(r.Header.Get("X-Api-Key"))
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<title>mine</title>"))
	}))
	defer owned.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			otherKey.Store(r.Header.Get("X-Api-Key"))
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<title>other</title>"))
	}))
	defer other.Close()
	var inFlight, peak atomic.Int64
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(20 * time.Millisecond) // a page that takes a moment, so requests could overlap
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			for i := range 12 {
				fmt.Fprintf(w, `<a href="/p%d">p</a>`, i)
			}
		}
	}))
	defer busy.Close()
	ownedHost, otherHost := strings.TrimPrefix(owned.URL, "http://"), strings.TrimPrefix(other.URL, "http://")
	conf := writeFile(t, "hosts.toml", []byte(fmt.Sprintf(`
[%q]
ignore_robots = true

[%q]
max_rate = 1
headers = { "X-Api-Key" = "s3cret" }

[%q]
concurrency = 1
`, ownedHost, otherHost, strings.TrimPrefix(busy.URL, "http://"))))

	dir := t.TempDir()
	code, out, errOut := crawlCmd(t, "", "run", owned.URL+"/", other.URL+"/", busy.URL+"/", "--data", dir, "--quiet", "--initial-rate", "500", "--hosts-config", conf)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if st := urlState(t, dir, owned.URL+"/"); st.State != "fetched" || robotsRequests.Load() != 0 {
		t.Errorf("owned host: %+v after %d robots.txt requests; want fetched, robots.txt never asked for", st, robotsRequests.Load())
	}
	if got, _ := otherKey.Load().(string); got != "s3cret" {
		t.Errorf("the other host got X-Api-Key %q, want s3cret", got)
	}
	if got, _ := ownedKey.Load().(string); got != "" {
		t.Errorf("the owned host got X-Api-Key %q, want none", got)
	}
	if n := peak.Load(); n != 1 {
		t.Errorf("%d requests in flight at once to the host with concurrency 1", n)
	}
	for _, h := range statusJSON(t, dir).Hosts {
		if h.Host == otherHost && h.Rate > 1 {
			t.Errorf("%s: rate %g, want at most max_rate 1", h.Host, h.Rate)
		}
	}

	for _, tc := range []struct{ content, want string }{
		{"[\"a.example\"]\nmax_rate = \"fast\"\n", "hosts.toml:2:"},
		{"[\"a.example\"]\nmax_rate = 1\nburst = 3\n", `hosts.toml: ["a.example"]: unknown key "burst" (keys: max_rate, concurrency, ignore_robots, headers)`},
		{"max_rate = 1\n", `hosts.toml: "max_rate" is not a table of host settings`},
		{"[\"a.example/x\"]\nmax_rate = 1\n", `hosts.toml: ["a.example/x"]: want a host name`},
		{"[\"a.example\"]\nmax_rate = -1\n", `max_rate must be a positive number`},
		{"[\"a.example\"]\nheaders = { \"Cookie\" = \"a=b\" }\n", `hosts.toml: ["a.example"]: header "Cookie": Cookie is set by the crawler`},
	} {
		bad := writeFile(t, "hosts.toml", []byte(tc.content))
		code, _, errOut := crawlCmd(t, "", "run", owned.URL+"/", "--data", t.TempDir(), "--hosts-config", bad)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d, %q; want exit 2 and one line with %q", tc.content, code, errOut, tc.want)
		}
	}
}
