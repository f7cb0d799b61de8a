package render

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
)

// Interception: what render does with each request the page makes (refused, or asked of the
// Answerer), and how the answer is given to the browser within the page's caps.

// answered is the Answerer's answer to one paused request, for the page's event loop.
type answered struct {
	id   string
	resp *Response
	err  error
}

// pausedRequest is Fetch.requestPaused's params, the fields render reads.
type pausedRequest struct {
	RequestID string `json:"requestId"`
	Request   struct {
		URL             string            `json:"url"`
		URLFragment     string            `json:"urlFragment"`
		Method          string            `json:"method"`
		Headers         map[string]string `json:"headers"`
		PostData        string            `json:"postData"`
		HasPostData     bool              `json:"hasPostData"`
		PostDataEntries []struct {
			Bytes string `json:"bytes"`
		} `json:"postDataEntries"`
	} `json:"request"`
	FrameID             string `json:"frameId"`
	ResourceType        string `json:"resourceType"`
	RedirectedRequestID string `json:"redirectedRequestId"`
}

// prelude runs in every document before its own scripts: it removes the APIs render refuses,
// so a page takes the path it takes in a browser without them. Interception and the trap
// proxy refuse them anyway; this only spares the page the failures.
const prelude = `(() => {
  for (const [o, k] of [[Navigator.prototype, 'serviceWorker'], [window, 'WebSocket'],
      [window, 'WebSocketStream'], [window, 'EventSource'], [window, 'WebTransport'],
      [window, 'RTCPeerConnection'], [window, 'webkitRTCPeerConnection'], [window, 'SharedWorker']]) {
    try { delete o[k]; } catch (e) {}
  }
  try { Navigator.prototype.sendBeacon = function () { return false; }; } catch (e) {}
})();`

// intercept pauses every request of session and attaches to its children (frames in other
// processes, workers) paused before they run, so their requests are paused too.
func (p *page) intercept(ctx context.Context, session string) error {
	if err := p.c.call(ctx, session, "Fetch.enable", map[string]any{
		"patterns": []map[string]any{{"urlPattern": "*", "requestStage": "Request"}}}, nil); err != nil {
		return err
	}
	if err := p.c.call(ctx, session, "Network.setBypassServiceWorker", map[string]any{"bypass": true}, nil); err != nil {
		return err
	}
	return p.c.call(ctx, session, "Target.setAutoAttach", map[string]any{
		"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}, nil)
}

// userAgent sets Options.UserAgent in session, if there is one.
func (p *page) userAgent(ctx context.Context, session string) error {
	if p.o.UserAgent == "" {
		return nil
	}
	return p.c.call(ctx, session, "Network.setUserAgentOverride", map[string]any{"userAgent": p.o.UserAgent}, nil)
}

// refused are the resource types render fails without asking the Answerer.
var refused = map[string]bool{"WebSocket": true, "EventSource": true, "Ping": true,
	"CSPViolationReport": true, "Prefetch": true, "SignedExchange": true}

var kinds = map[string]Kind{"Script": KindScript, "Stylesheet": KindStylesheet, "Image": KindImage,
	"Font": KindFont, "XHR": KindXHR, "Fetch": KindXHR, "Media": KindMedia, "TextTrack": KindMedia}

// unwanted reports whether a request is one that render refuses whatever its resource type
// says: a prefetch or prerender (Sec-Purpose, Purpose), a guess at what the page may need; an
// event stream (Accept: text/event-stream, as EventSource sends), which never ends; the
// browser's own fetch of the page's icon for its tab (type Other, Accept image/*), which no
// rendering reads.
func unwanted(resourceType string, h map[string]string) bool {
	for k, v := range h {
		k, v = strings.ToLower(k), strings.ToLower(v)
		switch {
		case k == "accept" && resourceType == "Other" && strings.HasPrefix(v, "image/"):
			return true
		case (k == "sec-purpose" || k == "purpose") && (strings.Contains(v, "prefetch") || strings.Contains(v, "prerender")):
			return true
		case k == "accept" && strings.Contains(v, "text/event-stream"):
			return true
		}
	}
	return false
}

// paused decides what to do with one paused request.
func (p *page) paused(ctx context.Context, session string, r *pausedRequest) error {
	p.inflight++
	if passiveTypes[r.ResourceType] {
		p.passive[session+"\x00"+r.RequestID] = true
	}
	mainFrame := r.FrameID == p.target && r.ResourceType == "Document"
	if session != p.session || (r.FrameID != p.target) {
		p.foreign = true
	} else if r.ResourceType == "XHR" || r.ResourceType == "Fetch" {
		p.scripted++
	}
	switch {
	case mainFrame && !p.navigated:
		p.navigated = true
		doc := p.doc
		if doc == nil {
			doc = &Response{Status: http.StatusOK}
		}
		go p.fulfill(ctx, session, r.RequestID, doc, true, "")
		return nil
	case mainFrame && r.RedirectedRequestID == "":
		// The page navigating itself away (a link followed, location set): aborted, which
		// leaves the page as it is (a failure would replace it with an error page).
		go p.fail(ctx, session, r.RequestID, "Aborted")
		return nil
	case p.cut != CutNone, refused[r.ResourceType], unwanted(r.ResourceType, r.Request.Headers):
		go p.fail(ctx, session, r.RequestID, "BlockedByClient")
		return nil
	}
	req, ok := p.request(r)
	if !ok {
		go p.fail(ctx, session, r.RequestID, "BlockedByClient")
		return nil
	}
	if p.res.Requests >= p.o.MaxRequests {
		p.cut = CutRequests
		go p.fail(ctx, session, r.RequestID, "BlockedByClient")
		return errCut
	}
	p.res.Requests++
	if e := p.entryOf(r); e != "" {
		p.expect[session+"\x00"+r.RequestID] = e
	}
	go func() {
		resp, err := p.a.Answer(ctx, req)
		select {
		case p.answ <- answered{id: session + "\x00" + r.RequestID, resp: resp, err: err}:
		case <-p.stop:
		}
	}()
	return nil
}

// request builds the Request the Answerer sees, or reports false when the page's request is
// over a bound (URL, headers, body).
func (p *page) request(r *pausedRequest) (*Request, bool) {
	u := r.Request.URL + r.Request.URLFragment
	if len(u) > maxURL || len(r.Request.Headers) > maxHeaderCount {
		return nil, false
	}
	h := make(http.Header, len(r.Request.Headers))
	n := 0
	for k, v := range r.Request.Headers {
		n += len(k) + len(v)
		h.Set(k, v)
	}
	if n > maxRequestHeader {
		return nil, false
	}
	if o := origin(u); o != "" {
		p.origins[o] = true
	}
	req := &Request{URL: u, Method: r.Request.Method, Header: h, Kind: KindOther}
	if k, ok := kinds[r.ResourceType]; ok {
		req.Kind = k
	} else if r.ResourceType == "Document" {
		req.Kind = KindFrame
		if r.FrameID == p.target {
			req.Kind = KindDocument // a redirect of the navigation
		}
	}
	if r.Request.HasPostData {
		var body []byte
		if len(r.Request.PostDataEntries) > 0 {
			for _, e := range r.Request.PostDataEntries {
				if len(body)+base64.StdEncoding.DecodedLen(len(e.Bytes)) > maxRequestBody {
					return nil, false
				}
				b, err := base64.StdEncoding.DecodeString(e.Bytes)
				if err != nil {
					return nil, false
				}
				body = append(body, b...)
			}
		} else {
			body = []byte(r.Request.PostData)
		}
		if len(body) > maxRequestBody {
			return nil, false
		}
		req.Body = body
	}
	return req, true
}

// answered gives the Answerer's answer to the browser, within the byte cap.
func (p *page) answered(ctx context.Context, a answered) error {
	session, id, _ := strings.Cut(a.id, "\x00")
	entry := p.expect[a.id]
	delete(p.expect, a.id)
	if a.err != nil || a.resp == nil {
		go p.fail(ctx, session, id, "Failed")
		return nil
	}
	if p.res.Bytes+int64(len(a.resp.Body)) > p.o.MaxBytes {
		p.cut = CutBytes
		go p.fail(ctx, session, id, "BlockedByClient")
		return errCut
	}
	p.res.Bytes += int64(len(a.resp.Body))
	go p.fulfill(ctx, session, id, a.resp, false, entry)
	return nil
}

// dropped are response headers the browser must not see: the body is already decoded and
// whole.
var dropped = map[string]bool{"Content-Encoding": true, "Content-Length": true, "Transfer-Encoding": true}

func (p *page) fulfill(ctx context.Context, session, id string, r *Response, navigation bool, entry string) {
	done := "" // the entry to look for, once the browser took the answer
	defer func() { p.finishWith(session+"\x00"+id, done) }()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if r.Status < 100 || r.Status > 999 {
		p.c.call(cctx, session, "Fetch.failRequest", map[string]any{"requestId": id, "errorReason": "Failed"}, nil)
		return
	}
	type header struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	hs := []header{}
	hasType := false
	for k, vs := range r.Header {
		ck := http.CanonicalHeaderKey(k)
		if dropped[ck] {
			continue
		}
		hasType = hasType || ck == "Content-Type"
		for _, v := range vs {
			hs = append(hs, header{k, v})
		}
	}
	if navigation && !hasType {
		hs = append(hs, header{"Content-Type", "text/html"})
	}
	phrase := http.StatusText(r.Status)
	if phrase == "" {
		phrase = "Status"
	}
	err := p.c.call(cctx, session, "Fetch.fulfillRequest", map[string]any{"requestId": id,
		"responseCode": r.Status, "responsePhrase": phrase, "responseHeaders": hs,
		"body": base64.StdEncoding.EncodeToString(r.Body)}, nil)
	if err != nil && !errors.Is(err, errBrowserGone) {
		// headers the browser rejects: the page sees a failed request
		p.c.call(cctx, session, "Fetch.failRequest", map[string]any{"requestId": id, "errorReason": "Failed"}, nil)
	}
	if err == nil {
		done = entry
	}
}

func (p *page) fail(ctx context.Context, session, id, reason string) {
	defer p.finishWith(session+"\x00"+id, "")
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	p.c.call(cctx, session, "Fetch.failRequest", map[string]any{"requestId": id, "errorReason": reason}, nil)
}
