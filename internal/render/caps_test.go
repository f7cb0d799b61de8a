package render

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func text(body string) *Response {
	return &Response{Status: 200, Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte(body)}
}

// recorder answers with f and records what it was asked.
type recorder struct {
	f     func(r *Request) (*Response, error)
	mu    sync.Mutex
	asked []*Request
}

func (a *recorder) Answer(ctx context.Context, r *Request) (*Response, error) {
	a.mu.Lock()
	a.asked = append(a.asked, r)
	a.mu.Unlock()
	return a.f(r)
}

func (a *recorder) urls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var u []string
	for _, r := range a.asked {
		u = append(u, r.Kind.String()+" "+r.URL)
	}
	return u
}

// TestRedirect: a 3xx answer with Location is followed by the browser, and the next hop is
// asked of the Answerer too; so is the next hop of a document given as a redirect.
func TestRedirect(t *testing.T) {
	b := startBrowser(t, Options{Tabs: 1, Quiet: testQuiet})
	a := &recorder{f: func(r *Request) (*Response, error) {
		switch {
		case strings.HasSuffix(r.URL, "/old.js"):
			return &Response{Status: 302, Header: http.Header{"Location": {"/new.js"}}}, nil
		case strings.HasSuffix(r.URL, "/new.js"):
			return &Response{Status: 200, Header: http.Header{"Content-Type": {"text/javascript"}},
				Body: []byte(`document.getElementById('x').textContent = 'redirected script ran';`)}, nil
		case strings.HasSuffix(r.URL, "/moved"):
			return htmlDoc(`<p id="x">the moved page</p><script src="/old.js"></script>`), nil
		}
		return nil, errors.New("no")
	}}
	res := render(t, b, "http://site.test/p", htmlDoc(`<p id="x">no</p><script src="/old.js"></script>`), a)
	if !strings.Contains(string(res.DOM), "redirected script ran") {
		t.Errorf("the redirected script did not run: %s (asked %v)", res.DOM, a.urls())
	}
	if got, want := strings.Join(a.urls(), ", "), "script http://site.test/old.js, script http://site.test/new.js"; got != want {
		t.Errorf("asked %s, want %s", got, want)
	}

	a.asked = nil
	doc := &Response{Status: 301, Header: http.Header{"Location": {"/moved"}}}
	res = render(t, b, "http://site.test/old", doc, a)
	if !strings.Contains(string(res.DOM), "redirected script ran") {
		t.Errorf("the moved page's script did not run: %s (asked %v)", res.DOM, a.urls())
	}
	if got, want := strings.Join(a.urls(), ", "), "document http://site.test/moved, script http://site.test/old.js, script http://site.test/new.js"; got != want {
		t.Errorf("asked %s, want %s", got, want)
	}
}

// TestCaps: pages that never settle end at a cap, kept as rendered, with Cut naming it.
func TestCaps(t *testing.T) {
	// A render cut by Timeout (3 s) ends by then plus the grace to read the DOM (5 s); the
	// rest is slack for a loaded machine. The pages cut by another cap render in a browser
	// whose Timeout is long, so that a loaded machine's slow start of a tab cannot cut them
	// by time first; a cap that failed would still end them by Timeout, not by their cap.
	const capBound = 15 * time.Second
	o := Options{Tabs: 1, Quiet: testQuiet, Timeout: 3 * time.Second, MaxRequests: 20, MaxBytes: 10_000, MaxDOM: 20_000}
	short := startBrowser(t, o)
	o.Timeout = time.Minute
	long := startBrowser(t, o)
	for _, tc := range []struct {
		name    string
		page    string
		answer  func(ctx context.Context, r *Request) (*Response, error)
		want    Cut
		maxTook time.Duration
		check   func(t *testing.T, res *Result)
	}{
		{"polling never idle", `<p>static</p><script>setInterval(() => fetch('/poll?' + Math.random()), 20)</script>`,
			func(ctx context.Context, r *Request) (*Response, error) { return text("x"), nil },
			CutRequests, time.Minute, func(t *testing.T, res *Result) {
				if res.Requests != 20 {
					t.Errorf("Requests = %d, want 20", res.Requests)
				}
			}},
		{"long poll", `<p>static</p><script>fetch('/long').then(r => r.text()).then(t => document.body.append(t))</script>`,
			func(ctx context.Context, r *Request) (*Response, error) {
				<-ctx.Done() // the answer never comes: the render's end cancels it
				return nil, ctx.Err()
			}, CutTimeout, capBound, nil},
		{"bytes", `<p>static</p><img src="/a.png"><img src="/b.png"><img src="/c.png">`,
			func(ctx context.Context, r *Request) (*Response, error) {
				return &Response{Status: 200, Header: http.Header{"Content-Type": {"image/png"}}, Body: make([]byte, 4000)}, nil
			}, CutBytes, time.Minute, func(t *testing.T, res *Result) {
				if res.Bytes > 10_000 {
					t.Errorf("Bytes = %d, over the cap", res.Bytes)
				}
			}},
		{"dom", `<p>static</p><script>document.body.append('é'.repeat(200000))</script>`, nil, CutDOM, time.Minute,
			func(t *testing.T, res *Result) {
				if len(res.DOM) > 20_000 || len(res.DOM) < 19_000 {
					t.Errorf("len(DOM) = %d, want just under 20000", len(res.DOM))
				}
				if !strings.HasPrefix(string(res.DOM), "<html><head></head><body><p>static</p>") {
					t.Errorf("DOM starts %q", res.DOM[:min(80, len(res.DOM))])
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := AnswererFunc(func(ctx context.Context, r *Request) (*Response, error) {
				if tc.answer == nil {
					return nil, errors.New("no")
				}
				return tc.answer(ctx, r)
			})
			b := long
			if tc.want == CutTimeout {
				b = short
			}
			start := time.Now()
			res := render(t, b, "http://site.test/", htmlDoc(tc.page), a)
			if res.Cut != tc.want {
				t.Errorf("Cut = %v, want %v", res.Cut, tc.want)
			}
			if took := time.Since(start); took > tc.maxTook {
				t.Errorf("took %v, want at most %v", took, tc.maxTook)
			}
			if !strings.Contains(string(res.DOM), "<p>static</p>") {
				t.Errorf("the page was not kept as rendered: %.200s", res.DOM)
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}

// TestRequestBounds: a request whose body, URL or headers are over render's bounds fails in
// the browser without reaching the Answerer.
func TestRequestBounds(t *testing.T) {
	// The big requests take the loaded machine a while to build and send: a longer quiet.
	b := startBrowser(t, Options{Tabs: 1, Quiet: 3 * testQuiet})
	var mu sync.Mutex
	var got []string
	a := AnswererFunc(func(ctx context.Context, r *Request) (*Response, error) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL+" "+string(r.Body))
		mu.Unlock()
		return text("ok"), nil
	})
	page := `<p id="r"></p><script>
const log = m => document.getElementById('r').append(m + ';');
(async () => {
  for (const [name, p] of [
    ['small', fetch('/small', {method: 'POST', body: 'hello'})],
    ['big-body', fetch('/big', {method: 'POST', body: 'x'.repeat((1 << 20) + 1)})],
    ['big-header', fetch('/hdr', {headers: {'X-Big': 'y'.repeat(65 << 10)}})],
    ['long-url', fetch('/u?' + 'z'.repeat(65 << 10))],
  ]) { try { await p; log(name + ' ok'); } catch (e) { log(name + ' failed'); } }
})();
</script>`
	res := render(t, b, "http://site.test/", htmlDoc(page), a)
	want := "small ok;big-body failed;big-header failed;long-url failed;"
	if !strings.Contains(string(res.DOM), want) {
		t.Errorf("DOM lacks %q: %s", want, res.DOM)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "POST http://site.test/small hello" {
		t.Errorf("the Answerer was asked %q, want only the small POST with its body", got)
	}
}

// TestRendererCrash: the page's renderer crashing ends the render at once with ErrCrash; the
// browser itself is not restarted.
func TestRendererCrash(t *testing.T) {
	b := startBrowser(t, Options{Tabs: 1, Quiet: testQuiet, Timeout: 30 * time.Second})
	first := b.running()
	sessions := make(chan string, 1)
	b.opened = func(s string) { sessions <- s }
	a := AnswererFunc(func(ctx context.Context, r *Request) (*Response, error) {
		s := <-sessions
		go first.conn.call(ctx, s, "Page.crash", nil, nil) // it never answers: the renderer is gone
		<-ctx.Done()
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := b.Render(ctx, "http://site.test/", htmlDoc(`<script src="/a.js"></script>`), a)
	if !errors.Is(err, ErrCrash) {
		t.Fatalf("Render = %v, want ErrCrash", err)
	}
	if took := time.Since(start); took > 20*time.Second { // its Timeout is 30 s
		t.Errorf("the crash was noticed after %v", took)
	}
	b.opened = nil
	if b.running() != first {
		t.Errorf("the browser was restarted for a renderer crash")
	}
	renderAfter(t, b, "crash")
}

// TestDialogsDismissed: a page that opens alert and confirm dialogs still settles.
func TestDialogsDismissed(t *testing.T) {
	b := startBrowser(t, Options{Tabs: 1, Quiet: testQuiet, Timeout: 10 * time.Second})
	no := AnswererFunc(func(ctx context.Context, r *Request) (*Response, error) { return nil, errors.New("no") })
	res := render(t, b, "http://site.test/", htmlDoc(`<p id="x"></p><script>alert('a'); document.getElementById('x').textContent = 'confirm ' + confirm('c');</script>`), no)
	if res.Cut != CutNone || !strings.Contains(string(res.DOM), "confirm false") {
		t.Errorf("Cut %v, DOM %s", res.Cut, res.DOM)
	}
}
