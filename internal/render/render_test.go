package render

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// browserPath returns the browser the tests drive. Under CI=true a missing browser fails the
// test (CI installs chromium: .ci/run); elsewhere the test is skipped.
func browserPath(t testing.TB) string {
	t.Helper()
	p := FindBrowser()
	if p == "" && os.Getenv("CI") == "true" {
		t.Fatal("no chromium/chrome on PATH under CI=true: .ci/run installs chromium (apt-get install chromium); the rendering tests must run in CI")
	}
	if p == "" {
		t.Skip("no chromium/chrome on PATH: skipping (apt-get install chromium; under CI=true this fails)")
	}
	return p
}

// startBrowser starts a browser closed at the end of the test, and checks then that no
// process of it is left.
func startBrowser(t testing.TB, o Options) *Browser {
	t.Helper()
	o.Browser = browserPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		root := b.root
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if ps := processesNaming(root); len(ps) > 0 {
			t.Errorf("after Close, processes %v still name the profile %s", ps, root)
		}
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			t.Errorf("after Close, the profile directory %s is still there (%v)", root, err)
		}
	})
	return b
}

// site is a loopback web server that counts every request it gets, apart from those the
// test's Answerer makes (marked with a header): the page's own direct requests.
type site struct {
	*httptest.Server
	mu     sync.Mutex
	via    map[string]int // path -> requests made by the Answerer
	direct map[string]int // path -> requests that did not come through the Answerer
}

const viaHeader = "X-Test-Answerer"

func newSite(t testing.TB, h http.Handler) *site {
	s := &site{via: map[string]int{}, direct: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if r.Header.Get(viaHeader) != "" {
			s.via[r.URL.Path]++
		} else {
			s.direct[r.URL.Path]++
		}
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *site) counts() (via, direct map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	via, direct = map[string]int{}, map[string]int{}
	for k, v := range s.via {
		via[k] = v
	}
	for k, v := range s.direct {
		direct[k] = v
	}
	return via, direct
}

// fetcher answers by fetching from the loopback site, except the URLs deny matches, which
// it fails; it records every request it was asked.
type fetcher struct {
	deny func(*Request) bool
	mu   sync.Mutex
	reqs []*Request
	n    atomic.Int64
}

func (f *fetcher) Answer(ctx context.Context, r *Request) (*Response, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	f.n.Add(1)
	if f.deny != nil && f.deny(r) {
		return nil, fmt.Errorf("refused %s", r.URL)
	}
	hr, err := http.NewRequestWithContext(ctx, r.Method, r.URL, strings.NewReader(string(r.Body)))
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		hr.Header[k] = vs
	}
	hr.Header.Set(viaHeader, "1")
	resp, err := http.DefaultTransport.RoundTrip(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

func (f *fetcher) asked() []*Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*Request(nil), f.reqs...)
}

func htmlDoc(body string) *Response {
	return &Response{Status: 200, Header: http.Header{"Content-Type": {"text/html; charset=utf-8"}}, Body: []byte(body)}
}

func render(t testing.TB, b *Browser, url string, doc *Response, a Answerer) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := b.Render(ctx, url, doc, a)
	if err != nil {
		t.Fatalf("Render(%s): %v", url, err)
	}
	return res
}

// shellHandler serves an application shell's assets: a script that fetches content from the
// API and writes it into the page, a stylesheet and an image.
func shellHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/app.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		io.WriteString(w, `fetch('/api/items').then(r => r.json()).then(items => {
  const ul = document.getElementById('items');
  for (const it of items) { const li = document.createElement('li'); li.textContent = it; ul.appendChild(li); }
  document.getElementById('status').textContent = 'Loaded';
});`)
	})
	mux.HandleFunc("/api/items", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `["first item","second item","third item"]`)
	})
	mux.HandleFunc("/style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		io.WriteString(w, `body { color: #333 }`)
	})
	mux.HandleFunc("/logo.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n"))
	})
	return mux
}

const shellPage = `<!DOCTYPE html><html><head><title>Shell</title><link rel="stylesheet" href="/style.css">
<script src="/app.js" defer></script></head>
<body><p id="status">Loading…</p><ul id="items"></ul><img src="/logo.png"></body></html>`

func TestRenderShell(t *testing.T) {
	b := startBrowser(t, Options{Tabs: 2, Quiet: testQuiet})
	s := newSite(t, shellHandler())
	f := &fetcher{}
	res := render(t, b, s.URL+"/page", htmlDoc(shellPage), f)
	dom := string(res.DOM)
	for _, want := range []string{"<!DOCTYPE html>", "second item", `<p id="status">Loaded</p>`} {
		if !strings.Contains(dom, want) {
			t.Errorf("DOM lacks %q:\n%s", want, dom)
		}
	}
	if res.Cut != CutNone {
		t.Errorf("Cut = %v, want none", res.Cut)
	}
	kinds := map[string]Kind{}
	for _, r := range f.asked() {
		u := strings.TrimPrefix(r.URL, s.URL)
		kinds[u] = r.Kind
		if r.Navigation {
			t.Errorf("%s asked of the Answerer as the navigation", r.URL)
		}
	}
	want := map[string]Kind{"/style.css": KindStylesheet, "/app.js": KindScript, "/api/items": KindXHR, "/logo.png": KindImage}
	for u, k := range want {
		if kinds[u] != k {
			t.Errorf("Answerer asked for %s as %v, want %v (asked: %v)", u, kinds[u], k, kinds)
		}
	}
	if res.Requests != len(f.asked()) {
		t.Errorf("Result.Requests = %d, Answerer asked %d times", res.Requests, len(f.asked()))
	}
	via, direct := s.counts()
	if via["/page"] != 0 {
		t.Errorf("the document was fetched %d times; it must come from doc", via["/page"])
	}
	if len(direct) != 0 {
		t.Errorf("requests reached the server without the Answerer: %v", direct)
	}
}

// TestWorkerAndFrameRequests: a dedicated worker's requests and a cross-site frame's (in its
// own renderer process) go through the Answerer like the page's.
func TestWorkerAndFrameRequests(t *testing.T) {
	b := startBrowser(t, Options{Tabs: 1, Quiet: testQuiet})
	mux := http.NewServeMux()
	mux.HandleFunc("/worker.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		io.WriteString(w, `fetch('/api/w').then(r => r.text()).then(t => postMessage(t));`)
	})
	mux.HandleFunc("/api/w", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "from-the-worker") })
	mux.HandleFunc("/frame", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<p>frame</p><script>fetch('/api/f').then(r => r.text()).then(t => parent.postMessage(t, '*'))</script>`)
	})
	mux.HandleFunc("/api/f", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "from-the-frame") })
	s := newSite(t, mux)
	// The frame is served as another site (localhost is not 127.0.0.1), so it gets its own
	// process and its own DevTools session.
	frameURL := strings.Replace(s.URL, "127.0.0.1", "localhost", 1) + "/frame"
	f := &fetcher{}
	page := `<!DOCTYPE html><body><p id="w">waiting</p><p id="f">waiting</p>
<iframe src="` + frameURL + `"></iframe><script>
new Worker('/worker.js').onmessage = e => { document.getElementById('w').textContent = e.data; };
addEventListener('message', e => { document.getElementById('f').textContent = e.data; });
</script></body>`
	res := render(t, b, s.URL+"/", htmlDoc(page), f)
	for _, want := range []string{"from-the-worker", "from-the-frame"} {
		if !strings.Contains(string(res.DOM), want) {
			t.Errorf("DOM lacks %q:\n%s", want, res.DOM)
		}
	}
	_, direct := s.counts()
	if len(direct) != 0 {
		t.Errorf("requests reached the server without the Answerer: %v", direct)
	}
	var asked []string
	for _, r := range f.asked() {
		asked = append(asked, r.Kind.String()+" "+r.URL)
	}
	t.Logf("asked: %v", asked)
}

// current_ returns the running browser instance.
func (b *Browser) running() *instance {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inst
}

// testQuiet is the quiet time of the tests' renders: long enough that a loaded machine
// running the race detector does not take a pause between a script's requests for the end.
const testQuiet = time.Second

// TestUserAgent: Options.UserAgent is what the page's script and its requests see.
func TestUserAgent(t *testing.T) {
	const ua = "crawl-test/1.0 (+http://example.invalid/bot)"
	b := startBrowser(t, Options{Tabs: 1, Quiet: testQuiet, UserAgent: ua})
	var got atomic.Value
	a := AnswererFunc(func(ctx context.Context, r *Request) (*Response, error) {
		got.Store(r.Header.Get("User-Agent"))
		return text("x"), nil
	})
	res := render(t, b, "http://site.test/", htmlDoc(`<p id="ua"></p><script>document.getElementById('ua').textContent = navigator.userAgent; fetch('/x')</script>`), a)
	if !strings.Contains(string(res.DOM), `<p id="ua">`+ua+`</p>`) {
		t.Errorf("navigator.userAgent is not %q: %s", ua, res.DOM)
	}
	if g, _ := got.Load().(string); g != ua {
		t.Errorf("the request's User-Agent is %q, want %q", g, ua)
	}
}
