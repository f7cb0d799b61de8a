package render

import (
	"context"
	"encoding/json"
	"net/url"
)

// tab is one browser context holding one target (a tab), rendering pages one after another:
// its renderer process, once started, renders the next page of the same site without a new
// process, layout engine or script engine being set up. A tab is owned by one render at a
// time; between renders it waits in Browser.free.
type tab struct {
	in             *instance
	browserContext string
	target         string // also the main frame's id
	session        string
	prelude        string // the script it runs before each document's own (page.prelude)
	pages          int    // pages rendered in it
}

// Tab recycling: a tab is closed, and the next render opens a new one, after Options.TabPages
// pages, when its renderer's script heap passes maxTabHeap, when a page touched more than
// maxClearOrigins origins (too many to clear one by one), and after any page that did not
// settle (an error, a crash, a cap other than the DOM's): such a page may still be running.
const (
	maxTabHeap      = 128 << 20
	maxClearOrigins = 32
)

// openTab creates a browser context and its target, attaches to it, and sets interception up
// before anything loads. On error, what was made is returned for disposal.
func (p *page) openTab(ctx context.Context) (*tab, error) {
	t := &tab{in: p.in, prelude: p.prelude}
	var bc struct {
		BrowserContextID string `json:"browserContextId"`
	}
	if err := p.c.call(ctx, "", "Target.createBrowserContext", map[string]any{}, &bc); err != nil {
		return t, err
	}
	t.browserContext = bc.BrowserContextID
	var tg struct {
		TargetID string `json:"targetId"`
	}
	if err := p.c.call(ctx, "", "Target.createTarget", map[string]any{
		"url": "about:blank", "browserContextId": t.browserContext}, &tg); err != nil {
		return t, err
	}
	t.target = tg.TargetID
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if err := p.c.call(ctx, "", "Target.attachToTarget", map[string]any{
		"targetId": t.target, "flatten": true}, &s); err != nil {
		return t, err
	}
	t.session = s.SessionID
	p.c.register(t.session, p.sink)
	if err := p.c.call(ctx, "", "Browser.setDownloadBehavior", map[string]any{
		"behavior": "deny", "browserContextId": t.browserContext}, nil); err != nil {
		return t, err
	}
	for _, m := range []string{"Page.enable", "Inspector.enable"} {
		if err := p.c.call(ctx, t.session, m, nil, nil); err != nil {
			return t, err
		}
	}
	if err := p.userAgent(ctx, t.session); err != nil {
		return t, err
	}
	if p.prelude != "" {
		if err := p.c.call(ctx, t.session, "Page.addScriptToEvaluateOnNewDocument", map[string]any{
			"source": p.prelude}, nil); err != nil {
			return t, err
		}
	}
	if err := p.noCache(ctx, t.session); err != nil {
		return t, err
	}
	return t, p.intercept(ctx, t.session)
}

// noCache turns the renderer's caches off in session: its memory cache would answer a later
// page's requests in the same tab without asking, and every page's requests are to be asked,
// as in a tab of its own. The Network domain, which this needs, keeps no bodies.
func (p *page) noCache(ctx context.Context, session string) error {
	if err := p.c.call(ctx, session, "Network.enable", map[string]any{
		"maxTotalBufferSize": 1, "maxResourceBufferSize": 1, "maxPostDataSize": 0}, nil); err != nil {
		return err
	}
	return p.c.call(ctx, session, "Network.setCacheDisabled", map[string]any{"cacheDisabled": true}, nil)
}

// reset readies the tab for another page after one that settled: it checks the renderer's
// heap, navigates to about:blank (which ends the page's scripts, workers and frames, and
// cancels its requests), fails any request the leaving page still made, and clears the
// cookies of the browser context and the storage of every origin the page asked for. It
// reports false when the tab should be closed instead.
func (p *page) reset(ctx context.Context) bool {
	t := p.tab
	if t.pages >= p.o.TabPages || len(p.origins) > maxClearOrigins {
		return false
	}
	var heap struct {
		UsedSize float64 `json:"usedSize"`
	}
	if err := p.c.call(ctx, t.session, "Runtime.getHeapUsage", nil, &heap); err != nil || heap.UsedSize > maxTabHeap {
		return false
	}
	// sessionStorage belongs to the tab and DOMStorage clears only an origin that has a frame:
	// cleared while the page's frames are there (an origin without one has none to clear)
	if err := p.c.call(ctx, t.session, "DOMStorage.enable", nil, nil); err != nil {
		return false
	}
	for o := range p.origins {
		p.c.call(ctx, t.session, "DOMStorage.clear", map[string]any{
			"storageId": map[string]any{"securityOrigin": o, "isLocalStorage": false}}, nil)
	}
	if err := p.c.call(ctx, t.session, "DOMStorage.disable", nil, nil); err != nil {
		return false
	}
	nav := make(chan error, 1)
	go func() {
		nav <- p.c.call(ctx, t.session, "Page.navigate", map[string]any{"url": "about:blank"}, nil)
	}()
	// done when the reply has come, about:blank is committed in the main frame, and it has
	// stopped loading after that, whichever order the reply and the events come in
	replied, committed, stopped := false, false, false
	for !replied || !stopped {
		select {
		case <-p.sink.wake:
			evs, overflow := p.sink.take()
			if overflow {
				return false
			}
			for _, m := range evs {
				if m.SessionID != t.session && m.Method != "Fetch.requestPaused" {
					continue
				}
				switch m.Method {
				case "Fetch.requestPaused":
					var r pausedRequest
					if json.Unmarshal(m.Params, &r) == nil {
						p.c.call(ctx, m.SessionID, "Fetch.failRequest", map[string]any{
							"requestId": r.RequestID, "errorReason": "Aborted"}, nil)
						if p.left != nil {
							p.left(r.Request.URL)
						}
					}
				case "Page.frameNavigated":
					var f struct {
						Frame struct {
							ID       string `json:"id"`
							ParentID string `json:"parentId"`
							URL      string `json:"url"`
						} `json:"frame"`
					}
					if json.Unmarshal(m.Params, &f) == nil && f.Frame.ID == t.target && f.Frame.ParentID == "" {
						committed = f.Frame.URL == "about:blank"
					}
				case "Page.frameStoppedLoading":
					var f struct {
						FrameID string `json:"frameId"`
					}
					if json.Unmarshal(m.Params, &f) == nil && f.FrameID == t.target && committed {
						stopped = true
					}
				case "Inspector.targetCrashed":
					return false
				}
			}
		case err := <-nav:
			if err != nil {
				return false
			}
			replied, nav = true, nil
		case <-ctx.Done():
			return false
		case <-p.in.dead:
			return false
		}
	}
	// window.name belongs to the tab, not to a document
	if err := p.c.call(ctx, t.session, "Runtime.evaluate", map[string]any{"expression": `window.name = ""`}, nil); err != nil {
		return false
	}
	if err := p.c.call(ctx, "", "Storage.clearCookies", map[string]any{"browserContextId": t.browserContext}, nil); err != nil {
		return false
	}
	for o := range p.origins {
		if err := p.c.call(ctx, t.session, "Storage.clearDataForOrigin", map[string]any{
			"origin": o, "storageTypes": "all"}, nil); err != nil {
			return false
		}
	}
	return true
}

// origin returns the origin of an http or https URL, "" for any other.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// dispose closes the tab's browser context and everything in it. A browser that does not
// answer is killed: the next render starts another.
func (t *tab) dispose(c *conn) {
	select {
	case <-t.in.dead:
		return
	default:
	}
	if t.browserContext == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := c.call(ctx, "", "Target.disposeBrowserContext", map[string]any{
		"browserContextId": t.browserContext}, nil); err != nil && !t.in.alive(ctx) {
		t.in.kill()
	}
}
