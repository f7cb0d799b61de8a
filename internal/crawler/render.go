package crawler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/render"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/storage"
)

// Failure reasons of a page whose render failed twice (the browser restarted in between).
const (
	ReasonRenderCrash   = "render-crash"   // the browser died or hung (render.ErrCrash), or was closed
	ReasonRenderTimeout = "render-timeout" // the page produced no DOM within --render-timeout (render.ErrTimeout)
)

// renderTries is how many times a page is rendered when the browser crashes or hangs on it.
const renderTries = 2

// renderState is what --render needs while a crawl runs: the browser (started by Run, closed
// when Run returns), what the rendered pages fetched, and the crawl's rendering figures.
type renderState struct {
	launch *launch // nil: RenderNever, or Run not started
	// start starts the browser; nil: render.Start. Tests give a stand-in.
	start  func(render.Options) (pageRenderer, error)
	subs   subresources
	freed  freedGates     // gates on which sub-requests ended, for the dispatcher
	counts renderCounters // all runs: counted from the store by initSubresources, then as pages are stored
}

// pageRenderer renders pages: a *render.Browser, or a test's stand-in.
type pageRenderer interface {
	Render(ctx context.Context, pageURL string, doc *render.Response, a render.Answerer) (*render.Result, error)
	Close() error
}

// launch is the browser being started for a run: its start runs beside the run's first
// fetches (the seeds' robots.txt and pages), which need no browser, and the first render
// waits for it. b and err are set before done is closed.
type launch struct {
	done chan struct{}
	b    pageRenderer
	err  error
}

// browserFault is a browser that did not start: the run stops with it, and the page that
// was to be rendered is given back to the frontier.
type browserFault struct{ err error }

func (e *browserFault) Error() string { return e.err.Error() }
func (e *browserFault) Unwrap() error { return e.err }

// browser waits for l's start to end and returns its browser, or why it did not start, or
// ctx's error.
func (l *launch) browser(ctx context.Context) (pageRenderer, error) {
	select {
	case <-l.done:
		return l.b, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// startBrowser reads the sub-resources earlier runs stored and starts the browser in the
// background when pages are rendered. Run calls it before its first job; a browser that
// fails to start fails the first render, which stops the run with that error.
func (c *Crawler) startBrowser() error {
	if c.cfg.Render.Mode == RenderNever || c.renders.launch != nil {
		return nil
	}
	if err := c.initSubresources(); err != nil {
		return err
	}
	start := c.renders.start
	if start == nil {
		start = func(o render.Options) (pageRenderer, error) { return render.Start(context.Background(), o) }
	}
	l := &launch{done: make(chan struct{})}
	c.renders.launch = l
	o := render.Options{Browser: c.cfg.Render.Browser, Tabs: c.cfg.Render.Tabs, Timeout: c.cfg.Render.Timeout,
		UserAgent: c.cfg.UserAgent}
	go func() {
		defer close(l.done)
		l.b, l.err = start(o)
		if l.err != nil {
			l.err = &browserFault{fmt.Errorf("--render %v: %w", c.cfg.Render.Mode, l.err)}
		}
	}()
	return nil
}

// closeBrowser closes the browser, if started (waiting for its start to end), once no job
// renders.
func (c *Crawler) closeBrowser() {
	l := c.renders.launch
	if l == nil {
		return
	}
	<-l.done
	if l.b != nil {
		if err := l.b.Close(); err != nil {
			c.log.Warn("closing the browser", "err", err)
		}
	}
	c.renders.launch = nil
}

// renderable reports whether the result res of lease l is a page --render decides on: a 2xx
// HTML page fetched as a page (not a requisite, not a sitemap).
func (c *Crawler) renderable(l frontier.Lease, res *frontier.Result) bool {
	p := res.Page
	if c.renders.launch == nil || res.Kind != frontier.Fetched || p == nil || l.Role != frontier.RolePage {
		return false
	}
	return p.Status >= 200 && p.Status < 300 && isHTML(p.ContentType)
}

// renderInto renders the page of res (fetched for lease l from u) when --render says so: the
// browser is given the body already fetched as the document (no second fetch), every
// sub-request is answered through the crawl (answerer), and the page is stored with its
// rendered DOM beside the raw body; the DOM's links are added to those of the raw HTML. A
// crash or hang is tried once more, then the URL fails with ReasonRenderCrash or
// ReasonRenderTimeout. It returns ctx's error when the run is cut short (the caller gives the
// lease back: the page is fetched and rendered again by a later run), or a store failure.
func (c *Crawler) renderInto(ctx context.Context, l frontier.Lease, u *url.URL, res *frontier.Result) error {
	if !c.renderable(l, res) {
		return nil
	}
	p := res.Page
	if c.cfg.Render.Mode == RenderAuto && !needsRender(p.Body) {
		return nil
	}
	base := u
	if f, err := url.Parse(p.FinalURL); err == nil && p.FinalURL != "" {
		base = f
	}
	a := &answerer{c: c, from: renderingPage{url: l.URL, depth: l.Depth}, lease: l, base: base, early: map[string]bool{}}
	stop := c.preload(ctx, a, base, p.Body)
	defer stop()
	browser, err := c.renders.launch.browser(ctx)
	if err != nil {
		return err
	}
	doc := &render.Response{Status: p.Status, Header: p.Header.Clone(), Body: p.Body}
	var out *render.Result
	tries := 0
	for tries < renderTries {
		tries++
		out, err = browser.Render(ctx, base.String(), doc, a)
		if ctx.Err() != nil || !(errors.Is(err, render.ErrCrash) || errors.Is(err, render.ErrTimeout)) {
			break
		}
		c.log.Info("render failed; trying the page once more", "url", l.URL, "err", err)
	}
	stop() // its store failures are a's too
	if ferr := a.storeErr(); ferr != nil {
		return ferr
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		reason := ReasonRenderCrash
		if errors.Is(err, render.ErrTimeout) {
			reason = ReasonRenderTimeout
		}
		c.renders.counts.failed.Add(1)
		*res = frontier.Result{Kind: frontier.Failed, Reason: reason, Detail: fmt.Sprintf("%v (after %d tries)", err, tries)}
		return nil
	}
	p.Rendered = out.DOM
	p.Render = &storage.RenderInfo{Cut: renderCut(out.Cut), Requests: out.Requests, Bytes: out.Bytes, Took: out.Took}
	seen := map[string]bool{}
	for _, e := range res.Links {
		seen[e.URL] = true
	}
	for _, x := range res.Excluded {
		seen[x.URL] = true
	}
	room := fetch.MaxLinks
	a.mu.Lock()
	for u := range a.early { // already recorded: counted, not taken again
		if !seen[u] {
			seen[u] = true
			room--
		}
	}
	a.mu.Unlock()
	c.renderedLinks(res, l, base, out.DOM, seen, room)
	return nil
}

// renderedLinks adds to res the links of the rendered DOM that seen does not hold (seen then
// holds them), at most room of them, through the same scope, robots and program checks as
// the raw HTML's.
func (c *Crawler) renderedLinks(res *frontier.Result, l frontier.Lease, base *url.URL, dom []byte, seen map[string]bool, room int) {
	links := fetch.ExtractLinks(base, http.Header{}, "text/html", dom, c.agent)
	for _, lk := range links.Links {
		if room <= 0 {
			return
		}
		if lk.URL.User != nil {
			lk.URL.User = nil
			lk.Str = lk.URL.String()
		}
		if seen[lk.Str] {
			continue
		}
		seen[lk.Str] = true
		room--
		e := frontier.Entry{URL: lk.Str, Host: urlnorm.HostKey(lk.URL), Depth: l.Depth + 1, Parent: l.URL}
		if c.cfg.Hooks.Link != nil && !lk.NoFollow && !c.cfg.Hooks.Link(base, lk.URL, e.Depth) {
			res.Excluded = append(res.Excluded, frontier.Exclusion{Entry: e, Reason: frontier.ReasonFilter, Detail: "dropped by the program (Hooks.Link)"})
			continue
		}
		c.consider(res, e, lk.URL, lk.NoFollow)
	}
}

// renderCut is render's Cut as the store keeps it.
func renderCut(c render.Cut) storage.RenderCut {
	switch c {
	case render.CutTimeout:
		return storage.RenderCutTimeout
	case render.CutRequests:
		return storage.RenderCutRequests
	case render.CutBytes, render.CutDOM: // the DOM's cap is one on bytes too
		return storage.RenderCutBytes
	}
	return storage.RenderComplete
}

// answerer answers the sub-requests of one page's render through the crawl (subresource),
// and records the links of its DOM read early (Early). It is called from several goroutines
// at once.
type answerer struct {
	c     *Crawler
	from  renderingPage
	lease frontier.Lease
	base  *url.URL

	mu    sync.Mutex
	fault error           // the first store failure met: the crawl must stop
	early map[string]bool // URLs recorded (queued or excluded) from an early DOM: at most fetch.MaxLinks
}

// Early implements render.EarlyReader: the links of the page's DOM read while the page still
// loads are recorded now (frontier Add and Exclude, resultChunk a transaction), through the
// same checks as the links recorded when the page ends, and the dispatcher is woken for
// them. The page's lease is still held: a crawl stopped before its Complete fetches the page
// again, its early links already seen. Links already recorded, and those past fetch.MaxLinks
// for the page, are not taken again.
func (a *answerer) Early(dom []byte) {
	a.mu.Lock()
	seen := make(map[string]bool, len(a.early))
	for u := range a.early {
		seen[u] = true
	}
	room := fetch.MaxLinks - len(a.early)
	a.mu.Unlock()
	var res frontier.Result
	a.c.renderedLinks(&res, a.lease, a.base, dom, seen, room)
	if len(res.Links)+len(res.Excluded) == 0 {
		return
	}
	rec := res // record consumes its copy's slices; res keeps them
	err := a.c.record(&rec, 0)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		if a.fault == nil {
			a.fault = fmt.Errorf("recording the links of %s read early: %w", a.lease.URL, err)
		}
		return
	}
	for _, e := range res.Links {
		a.early[e.URL] = true
	}
	for _, x := range res.Excluded {
		a.early[x.URL] = true
	}
	a.c.renders.freed.poke()
}

// Answer implements render.Answerer.
func (a *answerer) Answer(ctx context.Context, r *render.Request) (*render.Response, error) {
	p, err := a.ask(ctx, subRequest{method: r.Method, url: r.URL, body: r.Body, bodyType: r.Header.Get("Content-Type"), header: pageHeader(r.Header)})
	if err != nil {
		return nil, err
	}
	h := p.Header.Clone()
	for _, k := range []string{"Content-Encoding", "Content-Length", "Transfer-Encoding"} {
		h.Del(k) // the body is decoded
	}
	body := p.Body
	if r.Method == http.MethodHead {
		body = nil
	}
	return &render.Response{Status: p.Status, Header: h, Body: body}, nil
}

// pageHeader is what of h, a rendered page's request headers, the crawl sends on (the fetch
// client leaves out those it sets itself): not the browser's own client hints and fetch
// metadata (Sec-*), nor its hints of no use to a server (Purpose, Upgrade-Insecure-Requests).
func pageHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		k = http.CanonicalHeaderKey(k)
		if strings.HasPrefix(k, "Sec-") || k == "Purpose" || k == "Upgrade-Insecure-Requests" {
			continue
		}
		out[k] = vs
	}
	return out
}

func (a *answerer) storeErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fault
}

// requisiteFromRender completes lease l, a requisite (--requisites) that a rendered page's
// browser already fetched in this crawl, with a copy of the sub-resource stored then, instead
// of fetching it again, and gives its admitted ticket t back; done is false for any other
// lease. A revisit (--recrawl) is fetched as usual.
func (c *Crawler) requisiteFromRender(l frontier.Lease, t *hostlimit.Ticket) (done bool, err error) {
	if c.renders.launch == nil || l.Role != frontier.RoleRequisite || l.Prev != 0 {
		return false, nil
	}
	s := &c.renders.subs
	s.mu.Lock()
	seq, ok := s.stored[l.URL]
	s.mu.Unlock()
	if !ok {
		return false, nil
	}
	p, err := c.db.Page(seq)
	if err != nil {
		return false, nil // fetched as usual
	}
	giveBack(t, time.Now())
	p.Seq, p.Subresource, p.Depth, p.Parent = 0, false, l.Depth, l.Parent
	return true, c.commitFetch(l, frontier.Result{Kind: frontier.Fetched, Page: p})
}
