package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"
	"unicode/utf8"
)

// page is one render, in a tab of its own for its time: a tab left by an earlier page, or a
// new one. All of its state is owned by the goroutine running run, then by the one calling
// close; requests are answered in goroutines that report back on done.
type page struct {
	o    Options
	in   *instance
	c    *conn
	url  string
	doc  *Response
	a    Answerer
	sink *sink

	prelude string               // script run before each document's own; "" in tests of what lies behind it
	opened  func(session string) // tests: called once the page's session is set up
	left    func(url string)     // tests: called with each request the page made as it left (reset)

	tab     *tab            // nil until open; nil again after close when the tab is disposed of
	target  string          // the tab's, also the main frame's id
	session string          // the tab's
	origins map[string]bool // of the page and of every request it made: cleared after it

	navigated bool              // the navigation request was answered from doc
	committed bool              // the browser committed the navigation: the DOM is the page's
	loaded    bool              // the main frame fired its load event
	inflight  int               // requests paused and not yet continued
	worker    bool              // a service or shared worker was refused: it stays paused until its tab goes
	foreign   bool              // a request of another frame or a child target was seen: the page cannot settle early
	scripted  int               // fetch and XMLHttpRequest requests of the main frame paused
	expect    map[string]string // request (session, id) -> its resource timing entry (entryOf), until answered
	entries   []string          // resource timing entries of the main frame's answered requests
	settled   bool              // the page settled and was read: its tab may render another (see close)
	cut       Cut
	res       Result

	early    func(dom []byte) // EarlyReader.Early of the Answerer; nil: no early reads
	parsed   bool             // the main frame fired DOMContentLoaded
	passive  map[string]bool  // requests in flight (session, id) that no DOM content depends on: images, fonts, media
	content  int              // requests ended that the DOM's content may depend on, and DOMContentLoaded
	readAt   int              // content at the last early read
	reads    int              // early reads started
	reading  bool             // an early read is under way
	earlyEnd chan struct{}    // an early read ended
	bg       sync.WaitGroup   // early reads; run waits for them after cancelling their context

	done chan finished // a request was fulfilled or failed
	answ chan answered // the Answerer answered
	stop chan struct{} // closed when run returns: goroutines stop reporting
}

// finished is one request handled; key is its (session, id), "" for a child or a dialog;
// entry is its resource timing entry when it was answered and render looks for one (entryOf).
type finished struct{ key, entry string }

// newPage makes a render of url in t, or in a new tab if t is nil.
func newPage(o Options, in *instance, t *tab, url string, doc *Response, a Answerer, prelude string) *page {
	p := &page{o: o, in: in, c: in.conn, tab: t, url: url, doc: doc, a: a, sink: newSink(), prelude: prelude,
		origins: map[string]bool{}, expect: map[string]string{}, done: make(chan finished), answ: make(chan answered), stop: make(chan struct{}),
		passive: map[string]bool{}, earlyEnd: make(chan struct{})}
	if r, ok := a.(EarlyReader); ok {
		p.early = r.Early
	}
	return p
}

// Early reads (EarlyReader): a page whose DOM content has all come while an image, a font or a
// medium holds its load event gives its DOM to the caller then, not only when it ends.
const (
	earlyHold     = settleQuiet // the least time only passive requests are in flight before a read
	maxEarlyReads = 3
)

// passiveTypes are the resource types whose answers change no DOM content a script reads.
var passiveTypes = map[string]bool{"Image": true, "Font": true, "Media": true, "TextTrack": true}

// earlyReady reports whether an early read may start now.
func (p *page) earlyReady() bool {
	return p.early != nil && !p.reading && p.reads < maxEarlyReads && p.cut == CutNone && p.committed && p.parsed &&
		len(p.passive) > 0 && p.inflight == len(p.passive) && p.content != p.readAt
}

// readEarly reads the DOM and gives it to p.early, then reports to the event loop.
func (p *page) readEarly(ctx context.Context) {
	defer p.bg.Done()
	if html, _, err := p.readDOM(ctx); err == nil && html != "" {
		p.early([]byte(html))
	}
	select {
	case p.earlyEnd <- struct{}{}:
	case <-ctx.Done():
	}
}

var (
	errCut           = errors.New("cut")                         // ends the event loop at a cap
	errRendererCrash = errors.New("the page's renderer crashed") // the browser is still up
)

func (p *page) run(ctx context.Context) (*Result, error) {
	start := time.Now()
	if u, err := url.Parse(p.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("render: %q is not an http or https URL", p.url)
	}
	p.origins[origin(p.url)] = true
	defer close(p.stop)
	rctx, cancel := context.WithCancel(ctx)
	defer p.bg.Wait() // after cancel: no early read outlives run
	defer cancel()    // ends the Answerer's calls still running
	if err := p.open(rctx); err != nil {
		return nil, p.classify(ctx, err)
	}
	if p.opened != nil {
		p.opened(p.session)
	}

	nav := make(chan error, 1)
	go func() {
		var r struct {
			ErrorText string `json:"errorText"`
		}
		err := p.c.call(rctx, p.session, "Page.navigate", map[string]any{"url": p.url}, &r)
		if err == nil && r.ErrorText != "" {
			err = fmt.Errorf("navigating to %s: %s", p.url, r.ErrorText)
		}
		nav <- err
	}()

	deadline := time.NewTimer(p.o.Timeout)
	defer deadline.Stop()
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	defer quiet.Stop()
	armed := false // quiet runs: loaded, nothing in flight since it was set
	gen := 0       // idle spells: a probe's verdict counts only for the spell it was asked in
	var idleSince time.Time
	verdicts := make(chan settleVerdict)
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	early := time.NewTimer(time.Hour)
	early.Stop()
	defer early.Stop()
	earlyArmed := false
	armEarly := func() {
		ready := p.earlyReady()
		switch {
		case ready && !earlyArmed:
			early.Reset(earlyHold)
		case !ready && earlyArmed:
			early.Stop()
		}
		earlyArmed = ready
	}
	armQuiet := func() {
		switch idle := p.loaded && p.inflight == 0; {
		case idle && !armed:
			quiet.Reset(p.o.Quiet)
			gen++
			idleSince = time.Now()
			if p.canSettle() {
				settle.Reset(settleQuiet / 2)
			}
		case !idle && armed:
			quiet.Stop()
			settle.Stop()
			gen++
		}
		armed = p.loaded && p.inflight == 0
	}
	var err error
loop:
	for {
		select {
		case <-p.sink.wake:
			evs, overflow := p.sink.take()
			for _, m := range evs {
				if err = p.event(rctx, m); err != nil {
					break loop
				}
			}
			if overflow && p.cut == CutNone {
				p.cut = CutRequests
				break loop
			}
		case a := <-p.answ:
			if err = p.answered(rctx, a); err != nil {
				break loop
			}
		case f := <-p.done:
			p.inflight--
			if f.entry != "" {
				p.entries = append(p.entries, f.entry)
			}
			if p.passive[f.key] {
				delete(p.passive, f.key)
			} else if f.key != "" {
				p.content++
			}
		case <-early.C:
			earlyArmed = false
			if p.earlyReady() {
				p.reading, p.readAt = true, p.content
				p.reads++
				p.bg.Add(1)
				go p.readEarly(rctx)
			}
		case <-p.earlyEnd:
			p.reading = false
		case <-settle.C:
			if armed && p.canSettle() {
				go p.probe(rctx, gen, append([]string(nil), p.entries...), p.scripted, verdicts)
			}
		case v := <-verdicts:
			if v.gen == gen && armed && v.settled {
				if rest := settleQuiet - time.Since(idleSince); rest > 0 {
					quiet.Reset(rest)
				} else {
					break loop
				}
			}
		case e := <-nav:
			if e != nil {
				err = e
				break loop
			}
			nav = nil
			p.committed = true
		case <-quiet.C:
			break loop
		case <-deadline.C:
			p.cut = CutTimeout
			break loop
		case <-p.in.dead:
			err = ErrCrash
			break loop
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		armQuiet()
		armEarly()
	}
	switch {
	case err == errRendererCrash:
		return nil, fmt.Errorf("%w: %s: the page's renderer crashed", ErrCrash, p.url)
	case err != nil && err != errCut:
		return nil, p.classify(ctx, err)
	}
	p.res.Cut = p.cut
	if !p.committed && nav != nil && p.cut != CutTimeout {
		// a cap reached while the navigation's reply was on its way
		select {
		case e := <-nav:
			p.committed = e == nil
		case <-time.After(grace):
		}
	}
	if !p.committed {
		return nil, fmt.Errorf("%w: %s: the document was not loaded", ErrTimeout, p.url)
	}
	if err := p.capture(ctx); err != nil {
		return nil, err
	}
	p.res.Took = time.Since(start)
	p.settled = (p.res.Cut == CutNone || p.res.Cut == CutDOM) && !p.worker
	return &p.res, nil
}

// classify turns an error of a DevTools command into ErrCrash when the browser is gone or
// does not answer, and leaves other errors as they are.
func (p *page) classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	select {
	case <-p.in.dead:
		return fmt.Errorf("%w: %v", ErrCrash, err)
	default:
	}
	if errors.Is(err, errBrowserGone) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrCrash) {
		if errors.Is(err, ErrCrash) || !p.in.alive(ctx) {
			p.in.kill() // dead or hung: nothing more is asked of it
			return fmt.Errorf("%w: %v", ErrCrash, err)
		}
	}
	return err
}

// open readies the page's tab: a new one (see openTab), or the one it was given, whose
// session's events from now on go to this page.
func (p *page) open(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if p.tab == nil {
		t, err := p.openTab(cctx)
		p.tab = t
		if err != nil {
			return err
		}
	} else {
		p.c.register(p.tab.session, p.sink)
	}
	p.tab.pages++
	p.target, p.session = p.tab.target, p.tab.session
	return nil
}

// close readies the tab for the next page when the page settled and the tab has not served
// its time (see reset), and otherwise disposes of it and sets p.tab to nil. It is called once
// run has returned (its Answerer's calls cancelled).
func (p *page) close() {
	settled := p.settled
	if p.tab == nil {
		p.c.unregister(p.sink)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if settled && p.reset(ctx) {
		p.c.unregister(p.sink)
		return
	}
	p.c.unregister(p.sink)
	p.tab.dispose(p.c)
	p.tab = nil
}

// event handles one event of the page's sessions.
func (p *page) event(ctx context.Context, m message) error {
	switch m.Method {
	case "Fetch.requestPaused":
		var r pausedRequest
		if err := json.Unmarshal(m.Params, &r); err != nil {
			return fmt.Errorf("Fetch.requestPaused: %w", err)
		}
		return p.paused(ctx, m.SessionID, &r)
	case "Page.domContentEventFired":
		if m.SessionID == p.session && p.navigated && !p.parsed {
			p.parsed = true
			p.content++
		}
	case "Page.loadEventFired":
		if m.SessionID == p.session && p.navigated {
			p.loaded = true
		}
	case "Page.frameStoppedLoading":
		// Also the end of a document whose load event a navigation it started (and render
		// aborted) pre-empted.
		var f struct {
			FrameID string `json:"frameId"`
		}
		if json.Unmarshal(m.Params, &f) == nil && f.FrameID == p.target && m.SessionID == p.session && p.navigated {
			p.loaded = true
		}
	case "Target.attachedToTarget":
		var a struct {
			SessionID  string `json:"sessionId"`
			TargetInfo struct {
				Type string `json:"type"`
			} `json:"targetInfo"`
		}
		if err := json.Unmarshal(m.Params, &a); err != nil {
			return fmt.Errorf("Target.attachedToTarget: %w", err)
		}
		if a.TargetInfo.Type == "service_worker" || a.TargetInfo.Type == "shared_worker" {
			// Refused: left paused before its first instruction, and disposed of with the
			// browser context (the tab renders no other page).
			p.worker = true
			return nil
		}
		p.inflight++
		p.foreign = true
		go p.child(ctx, a.SessionID, a.TargetInfo.Type)
	case "Page.javascriptDialogOpening":
		// alert, confirm, prompt, beforeunload: dismissed, or the page would wait forever
		p.inflight++
		go func() {
			defer p.finish()
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			p.c.call(cctx, m.SessionID, "Page.handleJavaScriptDialog", map[string]any{"accept": false}, nil)
		}()
	case "Inspector.targetCrashed":
		if m.SessionID == p.session {
			return errRendererCrash
		}
	}
	return nil
}

// child sets interception up in an attached frame or worker, then lets it run.
func (p *page) child(ctx context.Context, session, typ string) {
	defer p.finish()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if typ == "iframe" {
		p.c.call(cctx, session, "Page.enable", nil, nil)
		if p.prelude != "" {
			p.c.call(cctx, session, "Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": p.prelude}, nil)
		}
		p.noCache(cctx, session)
	}
	p.userAgent(cctx, session)
	p.intercept(cctx, session)
	p.c.call(cctx, session, "Runtime.runIfWaitingForDebugger", nil, nil)
}

// finish reports a child or a dialog handled to the event loop.
func (p *page) finish() { p.finishWith("", "") }

// finishWith reports the request key (session, id) handled, answered with resource timing
// entry entry ("" for none), to the event loop.
func (p *page) finishWith(key, entry string) {
	select {
	case p.done <- finished{key: key, entry: entry}:
	case <-p.stop:
	}
}

// capture reads the serialised DOM into p.res, within MaxDOM. It returns ErrTimeout when the
// page cannot produce one within grace, and ErrCrash when the browser does not answer either.
func (p *page) capture(ctx context.Context) error {
	html, cut, err := p.readDOM(ctx)
	var script *errPageScript
	if errors.As(err, &script) {
		return err
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if c := p.classify(ctx, err); errors.Is(c, ErrCrash) {
			return c
		}
		return fmt.Errorf("%w: %s: %v", ErrTimeout, p.url, err)
	}
	if cut && p.res.Cut == CutNone {
		p.res.Cut = CutDOM
	}
	p.res.DOM = []byte(html)
	return nil
}

// errPageScript is the page's exception while its DOM was read.
type errPageScript struct{ text string }

func (e *errPageScript) Error() string { return e.text }

// readDOM returns the serialised DOM, within MaxDOM (cut reports it was cut), or the error of
// the DevTools call (within grace), or an *errPageScript.
func (p *page) readDOM(ctx context.Context) (html string, cut bool, err error) {
	limit := p.o.MaxDOM
	expr := fmt.Sprintf(`(() => {
  const e = document.documentElement;
  if (!e) return {html: "", cut: false};
  let h = e.outerHTML;
  if (document.doctype) h = new XMLSerializer().serializeToString(document.doctype) + h;
  return h.length > %d ? {html: h.slice(0, %d), cut: true} : {html: h, cut: false};
})()`, limit, limit)
	cctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	var r struct {
		Result struct {
			Value struct {
				HTML string `json:"html"`
				Cut  bool   `json:"cut"`
			} `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := p.c.call(cctx, p.session, "Runtime.evaluate", map[string]any{
		"expression": expr, "returnByValue": true}, &r); err != nil {
		return "", false, err
	}
	if r.ExceptionDetails != nil {
		return "", false, &errPageScript{fmt.Sprintf("reading the DOM of %s: %s", p.url, r.ExceptionDetails.Text)}
	}
	html = r.Result.Value.HTML
	if int64(len(html)) > limit {
		html = html[:limit]
		for i := 0; i < utf8.UTFMax && len(html) > 0; i++ { // no rune cut in two at the end
			if r, size := utf8.DecodeLastRuneInString(html); r != utf8.RuneError || size > 1 {
				break
			}
			html = html[:len(html)-1]
		}
		r.Result.Value.Cut = true
	}
	return html, r.Result.Value.Cut, nil
}
