package main

import (
	"bytes"
	"compress/gzip"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// seenRequest is what the origin server saw of one request.
type seenRequest struct {
	host, path, test, auth, cookie string
}

// TestProxyHeadersCredentials crawls a host name only a loopback forward proxy knows
// (site.test), through --proxy: every request, robots.txt included, goes through the proxy
// with the --header, the --cookies cookie and the seed's user:password as basic auth; the
// crawl's hosts are keyed by the destination (site.test), never the proxy; and the password
// appears nowhere: not in the output, crawl urls, crawl status or the export.
func TestProxyHeadersCredentials(t *testing.T) {
	var mu sync.Mutex
	var seen []seenRequest
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		mu.Lock()
		seen = append(seen, seenRequest{r.Host, r.URL.Path, r.Header.Get("X-Test"), user + ":" + pass, r.Header.Get("Cookie")})
		mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<a href="/a">a</a>`))
	}))
	defer origin.Close()
	originURL, _ := url.Parse(origin.URL)
	var proxied []string
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		mu.Lock()
		proxied = append(proxied, pr.In.URL.String())
		mu.Unlock()
		pr.SetURL(originURL)
		pr.Out.Host = pr.In.Host
		pr.Out.URL.Path = pr.In.URL.Path
	}})
	defer proxy.Close()

	seeds := writeFile(t, "seeds.txt", []byte("http://crawler:s3cret@site.test/\n"))
	cookies := writeFile(t, "cookies.txt", []byte("# Netscape HTTP Cookie File\nsite.test\tFALSE\t/\tFALSE\t0\tsession\tabc\n"))
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := runCmd([]string{"--quiet", "--seeds", seeds, "--data", dir, "--proxy", proxy.URL,
		"--header", "X-Test: yes", "--cookies", cookies, "--log-urls", filepath.Join(dir, "urls.jsonl")}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	mu.Lock()
	if len(seen) != 3 || len(proxied) != 3 {
		t.Errorf("origin saw %d requests, proxy %d (%q); want 3 each (robots.txt, /, /a)", len(seen), len(proxied), proxied)
	}
	for _, r := range seen {
		if r.host != "site.test" || r.test != "yes" || r.auth != "crawler:s3cret" || r.cookie != "session=abc" {
			t.Errorf("origin saw %+v; want host site.test, X-Test yes, basic auth crawler:s3cret, cookie session=abc", r)
		}
	}
	mu.Unlock()
	st := statusJSON(t, dir)
	if len(st.Hosts) != 1 || st.Hosts[0].Host != "site.test" || st.Fetched != 2 {
		t.Errorf("status: fetched %d, hosts %+v; want 2 pages of site.test", st.Fetched, st.Hosts)
	}

	all := out.String() + errb.String()
	var b bytes.Buffer
	urlsCmd([]string{"--data", dir}, &b, &errb)
	statusCmd([]string{"--data", dir, "--json"}, &b, &errb)
	all += b.String()
	export := filepath.Join(t.TempDir(), "out.jsonl")
	if code := exportCmd([]string{"--data", dir, "--format", "jsonl", "--out", export}, &b, &errb); code != exitOK {
		t.Fatalf("export: %s", errb.String())
	}
	warc := filepath.Join(t.TempDir(), "w")
	if code := exportCmd([]string{"--data", dir, "--format", "warc", "--out", warc}, &b, &errb); code != exitOK {
		t.Fatalf("export: %s", errb.String())
	}
	warcs, _ := filepath.Glob(warc + "*.warc.gz")
	if len(warcs) == 0 {
		t.Fatal("no WARC file written")
	}
	for _, f := range append([]string{export, filepath.Join(dir, "urls.jsonl"), filepath.Join(dir, "status.json")}, warcs...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if data, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), "X-Test: yes") {
				t.Errorf("the WARC request records lack the request headers sent")
			}
		}
		all += string(data)
	}
	if strings.Contains(all, "s3cret") || strings.Contains(all, "Y3Jhd2xlcjpzM2NyZXQ") || strings.Contains(all, "session=abc") {
		t.Errorf("a credential shows in the output, crawl urls, status, the URL log or the export:\n%s", all)
	}
	if !strings.Contains(all, `"url":"http://site.test/"`) {
		t.Errorf("the export does not hold the seed without its credentials")
	}
}

// TestTLSOptions: a server whose certificate is not in the system's roots is crawled with
// --ca-file naming its certificate, or with --insecure; bad network flags are usage errors
// naming the flag.
func TestTLSOptions(t *testing.T) {
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("ok"))
	}))
	defer s.Close()
	ca := writeFile(t, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}))
	seeds := writeFile(t, "seeds.txt", []byte(s.URL+"/\n"))
	for _, flag := range [][]string{{"--ca-file", ca}, {"--insecure"}} {
		dir := t.TempDir()
		runOK(t, append([]string{"--seeds", seeds, "--data", dir}, flag...)...)
		if st := statusJSON(t, dir); st.Fetched != 1 {
			t.Errorf("%q: fetched %d, want 1", flag, st.Fetched)
		}
	}
	notPEM := writeFile(t, "not.pem", []byte("hello"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ca-file", notPEM}, "--ca-file " + notPEM + ": no PEM certificate"},
		{[]string{"--proxy", "ftp://x"}, `--proxy: "ftp://x": want an http://, https:// or socks5:// URL`},
		{[]string{"--header", "NoColon"}, `--header "NoColon": want 'Name: value'`},
		{[]string{"--header", "User-Agent: x"}, "--user-agent"},
		{[]string{"--auth", "example.com=alice"}, `--auth "example.com=alice": want HOST=USER:PASSWORD`},
		{[]string{"--cookies", writeFile(t, "bad.txt", []byte("a\tb\n"))}, "bad.txt:1: want 7 tab-separated fields"},
		{[]string{"--max-time", "-1s"}, "--max-time must not be negative"},
	} {
		var out, errb bytes.Buffer
		if code := runCmd(append([]string{"--seeds", seeds, "--data", t.TempDir()}, tc.args...), &out, &errb); code != exitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), exitUsage, tc.want)
		}
	}
}

// TestMaxTime: a crawl of an endless site stops at --max-time, says so and exits 0; what it
// fetched is kept and a later run goes on.
func TestMaxTime(t *testing.T) {
	var n int
	var mu sync.Mutex
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<a href="/p` + strings.Repeat("x", i%7) + r.URL.Path[1:] + `1">next</a>`))
	}))
	defer s.Close()
	seeds := writeFile(t, "seeds.txt", []byte(s.URL+"/\n"))
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := runCmd([]string{"--quiet", "--seeds", seeds, "--data", dir, "--max-time", "500ms", "--initial-rate", "50"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "crawl max-time in") || !strings.Contains(errb.String(), "stopped after --max-time 500ms") {
		t.Errorf("output does not say the run stopped at --max-time:\n%s%s", out.String(), errb.String())
	}
	if st := statusJSON(t, dir); st.Fetched == 0 || st.Queued == 0 {
		t.Errorf("after --max-time: fetched %d, queued %d; want some of each", st.Fetched, st.Queued)
	}
}

// TestLoopbackProxyAllowsOnlyItself: a proxy on loopback lets the crawl dial exactly its
// address and port. A page fetched through it names requisites on another loopback port, on
// 127.0.0.2 and on localhost; those bypass the proxy (loopback is never proxied), so the guard
// must refuse them: each ends excluded as private-address and the target sees no request.
func TestLoopbackProxyAllowsOnlyItself(t *testing.T) {
	var hits sync.Map
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Store(r.Host+r.URL.Path, true)
		w.Write([]byte("secret"))
	}))
	defer target.Close()
	port := target.URL[strings.LastIndexByte(target.URL, ':')+1:]
	links := []string{
		"http://127.0.0.1:" + port + "/img-0",
		"http://127.0.0.2:" + port + "/img-1",
		"http://localhost:" + port + "/img-2",
	}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Host != "site.test" { // a forward proxy sees absolute URLs
			http.Error(w, "unknown host", http.StatusBadGateway)
			return
		}
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		for _, l := range links {
			w.Write([]byte(`<img src="` + l + `">`))
		}
	}))
	defer proxy.Close()

	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := runCmd([]string{"--quiet", "--data", dir, "--proxy", proxy.URL, "--requisites", "--requisites-scope", "any",
		"http://site.test/"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	hits.Range(func(k, _ any) bool {
		t.Errorf("the loopback target received %s directly", k)
		return true
	})
	for _, l := range links {
		if st := urlState(t, dir, l); st.State != "excluded" || st.Reason != "private-address" {
			t.Errorf("%s: %s %s; want excluded private-address", l, st.State, st.Reason)
		}
	}
}
