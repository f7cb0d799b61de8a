package render

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// A page's end comes sooner than its quiet time when the page itself says nothing is left to
// come (docs/render.md, "Settling before the quiet time"): once nothing has been in flight for
// half of settleQuiet, the main frame is asked (probe, through the prelude's settled) whether
// its event loop has gone round and a frame been drawn with no timer due within the quiet
// time, no animation frame or idle callback waiting, no image or font loading, every answered
// request of the frame seen by the renderer (its resource timing entry) and no fetch or
// XMLHttpRequest sent that render has not seen; if so, the page ends settleQuiet after its
// last answer. Any doubt (another frame, a worker, no prelude, a probe that does not answer
// within the quiet time) leaves the page to the quiet time.
const (
	settleQuiet   = 100 * time.Millisecond // the least time a settled page has nothing in flight
	maxSettleURLs = 200                    // answered requests a probe checks; past that, the quiet time
)

// settled is the part of the prelude that tracks what may still make a request: timers,
// animation frames and idle callbacks of the document's scripts, and the fetch and XMLHttpRequest sends, and
// answers a probe. Its own waits use the browser's timers, not the tracked ones.
const settled = `(() => {
  const w = window, st = w.setTimeout, si = w.setInterval, ct = w.clearTimeout, ci = w.clearInterval;
  const raf = w.requestAnimationFrame, caf = w.cancelAnimationFrame, now = () => performance.now();
  const timers = new Map(), frames = new Set();
  let sent = 0;
  w.setTimeout = function (f, d, ...a) {
    if (typeof f !== 'function') return st.call(w, f, d, ...a);
    const id = st.call(w, function () { timers.delete(id); return f.apply(this, a); }, d);
    timers.set(id, now() + (+d || 0));
    return id;
  };
  w.setInterval = function (f, d, ...a) {
    if (typeof f !== 'function') return si.call(w, f, d, ...a);
    const id = si.call(w, function () { timers.set(id, now() + (+d || 0)); return f.apply(this, a); }, d);
    timers.set(id, now() + (+d || 0));
    return id;
  };
  w.clearTimeout = function (id) { timers.delete(id); return ct.call(w, id); };
  w.clearInterval = function (id) { timers.delete(id); return ci.call(w, id); };
  if (raf) {
    w.requestAnimationFrame = function (f) {
      const id = raf.call(w, (t) => { frames.delete(id); return f(t); });
      frames.add(id);
      return id;
    };
    w.cancelAnimationFrame = function (id) { frames.delete(id); return caf.call(w, id); };
  }
  const ric = w.requestIdleCallback, cic = w.cancelIdleCallback, idles = new Set();
  if (ric) {
    w.requestIdleCallback = function (f, o) {
      const id = ric.call(w, (d) => { idles.delete(id); return f(d); }, o);
      idles.add(id);
      return id;
    };
    w.cancelIdleCallback = function (id) { idles.delete(id); return cic.call(w, id); };
  }
  const fetch0 = w.fetch;
  if (fetch0) w.fetch = function (...a) { sent++; return fetch0.apply(this, a); };
  const send0 = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.send = function (...a) { sent++; return send0.apply(this, a); };
  const turn = () => new Promise((r) => st.call(w, r, 0));
  Object.defineProperty(w, '__crawlSettled', { value: async (urls, quiet) => {
    for (let i = 0; i < 3; i++) await turn();
    if (raf) await new Promise((r) => raf.call(w, () => st.call(w, r, 0)));
    await turn();
    if (document.readyState !== 'complete') return -1;
    if (frames.size || idles.size) return -2;
    const t = now();
    for (const due of timers.values()) if (due - t <= quiet) return -3;
    for (const i of document.images) if (!i.complete) return -4;
    if (document.fonts && document.fonts.status === 'loading') return -5;
    const seen = new Set(performance.getEntriesByType('resource').map((e) => e.name));
    for (const u of urls) if (!seen.has(u)) return -6;
    return sent;
  } });
})();`

// settleVerdict is a probe's answer for the idle spell gen: whether the page has settled.
type settleVerdict struct {
	gen     int
	settled bool
}

// canSettle reports whether the page may end before its quiet time: its prelude runs, and it
// has no frame but the main one, no worker, and few enough answered requests to check.
func (p *page) canSettle() bool {
	return p.prelude != "" && !p.foreign && !p.worker && len(p.entries) <= maxSettleURLs && p.o.Quiet > settleQuiet
}

// probe asks the main frame whether it has settled (settled's __crawlSettled) and sends the
// verdict for idle spell gen to out, unless the page's render ended first. A probe that does
// not answer within the quiet time has not settled.
func (p *page) probe(ctx context.Context, gen int, urls []string, scripted int, out chan<- settleVerdict) {
	v := settleVerdict{gen: gen}
	defer func() {
		select {
		case out <- v:
		case <-p.stop:
		}
	}()
	list, err := json.Marshal(urls)
	if err != nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, p.o.Quiet)
	defer cancel()
	var r struct {
		Result struct {
			Value int `json:"value"`
		} `json:"result"`
		ExceptionDetails json.RawMessage `json:"exceptionDetails"`
	}
	expr := fmt.Sprintf("typeof __crawlSettled === 'function' ? __crawlSettled(%s, %d) : -1", list, p.o.Quiet.Milliseconds())
	if err := p.c.call(cctx, p.session, "Runtime.evaluate", map[string]any{"expression": expr,
		"awaitPromise": true, "returnByValue": true}, &r); err != nil || r.ExceptionDetails != nil {
		return
	}
	v.settled = r.Result.Value >= 0 && r.Result.Value <= scripted
}

// entryOf is the URL the renderer's resource timing names r by once it is answered, or ""
// when render does not look for one: a request of another frame, the navigation, a redirect
// hop, a CORS preflight; an image, font or medium, whose loading the probe reads from the
// document itself (an image a stylesheet names has no entry until it is drawn, and runs no
// script).
func (p *page) entryOf(r *pausedRequest) string {
	if r.FrameID != p.target || r.RedirectedRequestID != "" || r.Request.Method == "OPTIONS" {
		return ""
	}
	switch r.ResourceType {
	case "Script", "Stylesheet", "XHR", "Fetch": // images and fonts: their elements say (settled)
		return r.Request.URL
	}
	return ""
}
