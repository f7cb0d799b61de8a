package crawler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/render"
	"github.com/crawl-project/crawl/internal/simweb"
	"go.uber.org/goleak"
)

// scriptedBrowser stands for the browser: each page's renders fail with the errors scripted
// for it, in turn, then succeed with a DOM naming the page.
type scriptedBrowser struct {
	mu     sync.Mutex
	errs   map[string][]error // page path -> the errors of its next renders
	tries  map[string]int
	closed bool
}

func (b *scriptedBrowser) Render(ctx context.Context, pageURL string, doc *render.Response, a render.Answerer) (*render.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tries[pageURL]++
	for path, errs := range b.errs {
		if len(pageURL) >= len(path) && pageURL[len(pageURL)-len(path):] == path && len(errs) > 0 {
			b.errs[path] = errs[1:]
			return nil, errs[0]
		}
	}
	return &render.Result{DOM: []byte(fmt.Sprintf("<html><body><p>rendered %s</p></body></html>", pageURL)), Requests: 1}, nil
}

func (b *scriptedBrowser) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// TestRenderFailures: a page whose render crashes once is tried once more and kept rendered;
// one that crashes twice fails render-crash, one that times out twice render-timeout; the
// browser is closed when Run returns.
func TestRenderFailures(t *testing.T) {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 7}}, &simweb.Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	crash := fmt.Errorf("tab gone: %w", render.ErrCrash)
	b := &scriptedBrowser{tries: map[string]int{}, errs: map[string][]error{
		"/p1": {crash},
		"/p2": {crash, crash},
		"/p3": {render.ErrTimeout, render.ErrTimeout},
	}}
	cfg := testConfig(t, web)
	cfg.Render = Render{Mode: RenderAlways, Timeout: DefaultRenderTimeout}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.renders.start = func(render.Options) (pageRenderer, error) { return b, nil }
	sum, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st, _, _ := c.fr.(*frontier.Frontier).State(strings.TrimSuffix(web.URL("a"), "/") + "/p2")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if sum.FailedBy[ReasonRenderCrash] != 1 || sum.FailedBy[ReasonRenderTimeout] != 1 {
		t.Errorf("failed by %v, want one render-crash and one render-timeout", sum.FailedBy)
	}
	if r := sum.Render; r == nil || r.Rendered != 5 || r.Of != 5 || r.Failed != 2 {
		t.Errorf("render figures %+v, want 5 rendered of 5 stored, 2 failed", sum.Render)
	}
	base := strings.TrimSuffix(web.URL("a"), "/")
	for path, want := range map[string]int{"/p1": 2, "/p2": 2, "/p3": 2, "/p4": 1} {
		if got := b.tries[base+path]; got != want {
			t.Errorf("%s rendered %d times, want %d", path, got, want)
		}
	}
	if st.State != "failed" || st.Reason != ReasonRenderCrash {
		t.Errorf("/p2: %s %s, want failed render-crash", st.State, st.Reason)
	}
	if !b.closed {
		t.Error("the browser was not closed when Run returned")
	}
}

// TestRenderAuto: --render auto renders the page that is an application shell and leaves the
// article with scripts alone, deciding per page; the figures count both.
func TestRenderAuto(t *testing.T) {
	article := strings.Repeat("A paragraph the server wrote in full. ", 20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/":
			fmt.Fprintf(w, `<title>Article</title><p>%s</p><a href="/shell">app</a><script src="/analytics.js"></script>`, article)
		case "/shell":
			fmt.Fprint(w, `<title>App</title><div id="app">Loading…</div><script src="/app.js"></script>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cfg := Defaults()
	cfg.Dir = t.TempDir()
	cfg.Seeds = []string{srv.URL + "/"}
	cfg.InitialRate = 20
	cfg.Render = Render{Mode: RenderAuto, Timeout: DefaultRenderTimeout}
	b := &scriptedBrowser{tries: map[string]int{}, errs: map[string][]error{}}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.renders.start = func(render.Options) (pageRenderer, error) { return b, nil }
	sum, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b.tries[srv.URL+"/"] != 0 || b.tries[srv.URL+"/shell"] != 1 {
		t.Errorf("renders %v: want the shell once, the article never", b.tries)
	}
	if r := sum.Render; r == nil || r.Rendered != 1 || r.Of != 2 || r.Mode != "auto" {
		t.Errorf("render figures %+v, want auto: 1 rendered of 2", sum.Render)
	}
}

// fetchingBrowser stands for a browser whose every page asks for the URLs subs gives it, all
// at once, through the Answerer.
type fetchingBrowser struct {
	subs func(pageURL string) []string
}

func (b *fetchingBrowser) Render(ctx context.Context, pageURL string, doc *render.Response, a render.Answerer) (*render.Result, error) {
	var wg sync.WaitGroup
	for _, u := range b.subs(pageURL) {
		wg.Go(func() { a.Answer(ctx, &render.Request{URL: u, Method: "GET", Kind: render.KindXHR}) })
	}
	wg.Wait()
	return &render.Result{DOM: doc.Body}, nil
}

func (b *fetchingBrowser) Close() error { return nil }

// TestSubrequestsFreeTheirGate: a host whose one window slot the sub-requests of rendered
// pages keep taking still gets its own pages crawled: when a sub-request ends, the dispatcher
// asks the hosts that wait for that gate again, as when one of its own jobs ends.
func TestSubrequestsFreeTheirGate(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	web, err := simweb.Start([]simweb.HostSpec{
		{Name: "a", Pages: 12, CrossLinks: []string{"b"}},
		{Name: "b", Pages: 12},
	}, &simweb.Options{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	cfg := testConfig(t, web)
	cfg.Seeds = web.Seeds()[:1]
	cfg.Scope = ScopeDomain // a's links to b are followed: b has pages of its own in the frontier
	cfg.HostConcurrency = 1
	cfg.Render = Render{Mode: RenderAlways, Timeout: DefaultRenderTimeout}
	b := strings.TrimSuffix(web.URL("b"), "/")
	n := 0
	var mu sync.Mutex
	fb := &fetchingBrowser{subs: func(string) []string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return []string{fmt.Sprintf("%s/api/%d?x=1", b, n), fmt.Sprintf("%s/api/%d?x=2", b, n)}
	}}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.renders.start = func(render.Options) (pageRenderer, error) { return fb, nil }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = c.Run(ctx)
	c.Close()
	if err != nil {
		t.Fatalf("Run: %v (a host whose gate sub-requests freed was never asked again?)", err)
	}
	if got := len(storedOK(t, cfg.Dir)); got != 24 {
		t.Errorf("%d pages stored, want 24", got)
	}
	web.Close()
	goleak.VerifyNone(t, ignore) // the gates' waiters end with their queues
}

// TestRequisitesFromRender: with --requisites as well, a requisite the browser already fetched
// for a rendered page is stored from that answer, not fetched again.
func TestRequisitesFromRender(t *testing.T) {
	t.Parallel()
	a := startAppWeb(t, simweb.AppOptions{Pages: 3})
	cfg := a.config(t)
	cfg.Requisites = true
	cfg.Render = Render{Mode: RenderAlways, Timeout: DefaultRenderTimeout}
	files := []string{"/app.js", "/style.css", "/logo.png"}
	fb := &fetchingBrowser{subs: func(string) []string {
		var out []string
		for _, f := range files {
			out = append(out, a.url(simweb.AppCDN, f))
		}
		return out
	}}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.renders.start = func(render.Options) (pageRenderer, error) { return fb, nil }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = c.Run(ctx)
	var states []frontier.URLState
	for _, f := range files {
		st, _, _ := c.fr.(*frontier.Frontier).State(a.url(simweb.AppCDN, f))
		states = append(states, st)
	}
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		if n := a.app.CDNFetches()[f]; n != 1 {
			t.Errorf("%s fetched %d times, want 1", f, n)
		}
		if st := states[i]; st.State != "fetched" || st.Role != frontier.RoleRequisite {
			t.Errorf("%s: %s as %v, want fetched as a requisite", f, st.State, st.Role)
		}
	}
}

// TestBrowserStartsBesideFirstFetch: the browser's start does not hold back the run's first
// fetches; the first render waits for it. The stand-in start returns only once the seed's page
// was served, which never happens if the run waits for the browser before its first job.
func TestBrowserStartsBesideFirstFetch(t *testing.T) {
	served := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<title>App</title><div id="app">Loading…</div><script src="/app.js"></script>`)
		once.Do(func() { close(served) })
	}))
	defer srv.Close()
	c := openRenderingSeed(t, srv.URL+"/")
	b := &scriptedBrowser{tries: map[string]int{}, errs: map[string][]error{}}
	c.renders.start = func(render.Options) (pageRenderer, error) {
		select {
		case <-served:
			return b, nil
		case <-time.After(3 * time.Second):
			return nil, fmt.Errorf("the seed was not fetched while the browser started")
		}
	}
	sum, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := sum.Render; r == nil || r.Rendered != 1 || b.tries[srv.URL+"/"] != 1 {
		t.Errorf("render figures %+v, renders %v; want the seed rendered once", sum.Render, b.tries)
	}
	if !b.closed {
		t.Error("the browser was not closed when Run returned")
	}
}

// openRenderingSeed opens a crawl of one seed that renders every page; the test's cleanup
// closes it.
func openRenderingSeed(t *testing.T, seed string) *Crawler {
	t.Helper()
	cfg := Defaults()
	cfg.Dir = t.TempDir()
	cfg.Seeds = []string{seed}
	cfg.InitialRate = 20
	cfg.Render = Render{Mode: RenderAlways, Timeout: DefaultRenderTimeout}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestBrowserStartFails: a browser that fails to start stops the run with its error at the
// first render, and the page fetched for it stays queued for the next run.
func TestBrowserStartFails(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<title>App</title><div id="app">Loading…</div><script src="/app.js"></script>`)
	}))
	defer srv.Close()
	c := openRenderingSeed(t, srv.URL+"/")
	c.renders.start = func(render.Options) (pageRenderer, error) { return nil, render.ErrNoBrowser }
	if _, err := c.Run(context.Background()); !errors.Is(err, render.ErrNoBrowser) {
		t.Fatalf("Run: %v, want ErrNoBrowser", err)
	}
	st, ok, err := c.fr.(*frontier.Frontier).State(srv.URL + "/")
	if err != nil || !ok || st.State != "queued" {
		t.Errorf("the seed is %+v (known %v, %v), want queued", st, ok, err)
	}
}
