package render

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer is a loopback server that counts connections and requests: anything the
// page sends to it without the Answerer is a leak.
type countingServer struct {
	*httptest.Server
	conns, reqs atomic.Int64
}

func newCountingServer(t *testing.T, h http.Handler) *countingServer {
	s := &countingServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.reqs.Add(1)
		h.ServeHTTP(w, r)
	}))
	s.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// TestNothingEscapes renders a page that tries every way out of the browser that render
// refuses or that the Answerer fails: a fetch the Answerer fails, a second (out of scope)
// server, WebSocket, EventSource, beacons, <a ping>, prefetch and preconnect hints, a service
// worker, a shared worker, a popup, and the same APIs taken from a fresh about:blank frame.
// Neither server may see a connection that the Answerer did not make.
func TestNothingEscapes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prelude bool
	}{{"prelude", true}, {"no prelude", false}} {
		t.Run(tc.name, func(t *testing.T) { testNothingEscapes(t, tc.prelude) })
	}
}

// testNothingEscapes runs TestNothingEscapes with or without the prelude that removes the
// refused APIs from the page: without it, interception and the trap proxy must refuse them.
func testNothingEscapes(t *testing.T, prelude bool) {
	b := startBrowser(t, Options{Tabs: 1, Quiet: testQuiet, Timeout: 20 * time.Second})
	if !prelude {
		b.prelude = ""
	}
	outside := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "outside")
	}))
	ohost := strings.TrimPrefix(outside.URL, "http://")
	site := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sw.js":
			w.Header().Set("Content-Type", "text/javascript")
			io.WriteString(w, `self.addEventListener('fetch', e => e.respondWith(fetch('http://`+ohost+`/from-sw')));`)
		case "/allowed":
			io.WriteString(w, "allowed-body")
		default:
			io.WriteString(w, "ok")
		}
	}))
	shost := strings.TrimPrefix(site.URL, "http://")
	var dials atomic.Int64
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	var asked []string
	var mu = make(chan struct{}, 1)
	a := AnswererFunc(func(ctx context.Context, r *Request) (*Response, error) {
		mu <- struct{}{}
		asked = append(asked, r.Kind.String()+" "+r.URL)
		<-mu
		if !strings.HasPrefix(r.URL, site.URL+"/allowed") {
			return nil, io.ErrUnexpectedEOF // the crawl refuses everything else
		}
		hr, _ := http.NewRequestWithContext(ctx, r.Method, r.URL, nil)
		resp, err := tr.RoundTrip(hr)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
	})
	page := `<!DOCTYPE html><html><head>
<link rel="preconnect" href="http://` + ohost + `"><link rel="dns-prefetch" href="http://` + ohost + `">
<link rel="prefetch" href="http://` + ohost + `/prefetch"><link rel="preload" as="fetch" href="/denied-preload">
<script type="speculationrules">{"prerender":[{"source":"list","urls":["http://` + ohost + `/prerender"]}],"prefetch":[{"source":"list","urls":["/prefetch-rule"]}]}</script>
</head><body><a id="a" href="/x" ping="http://` + ohost + `/ping">x</a><ol id="log"></ol><script>
const log = m => { const li = document.createElement('li'); li.textContent = m; document.getElementById('log').appendChild(li); };
const tryAll = (w, tag) => {
  try { new w.WebSocket('ws://` + shost + `/ws'); log(tag + ' ws made'); } catch (e) { log(tag + ' ws: ' + e.name); }
  try { new w.WebSocket('ws://` + ohost + `/ws'); } catch (e) {}
  try { new w.EventSource('http://` + shost + `/sse'); log(tag + ' es made'); } catch (e) { log(tag + ' es: ' + e.name); }
  try { log(tag + ' beacon ' + w.navigator.sendBeacon('http://` + ohost + `/beacon', 'x')); } catch (e) { log(tag + ' beacon: ' + e.name); }
  try { new w.SharedWorker('/shared.js'); log(tag + ' shared worker made'); } catch (e) { log(tag + ' shared worker: ' + e.name); }
  try { w.navigator.serviceWorker.register('/sw.js').then(() => log(tag + ' sw registered'), e => log(tag + ' sw: ' + e)); } catch (e) { log(tag + ' sw: ' + e.name); }
  try { w.fetch('http://` + ohost + `/outside').then(() => log(tag + ' outside fetched'), e => log(tag + ' outside: ' + e)); } catch (e) {}
  try { w.fetch('/denied').then(() => log(tag + ' denied fetched'), e => log(tag + ' denied: ' + e)); } catch (e) {}
  try { const img = new w.Image(); img.src = 'http://` + ohost + `/img'; } catch (e) {}
  try { const pc = new w.RTCPeerConnection({iceServers: [{urls: 'stun:` + ohost + `'}]}); pc.createDataChannel('x'); pc.createOffer().then(o => pc.setLocalDescription(o)); log(tag + ' rtc made'); } catch (e) { log(tag + ' rtc: ' + e.name); }
};
tryAll(window, 'top');
const f = document.createElement('iframe'); document.body.appendChild(f); tryAll(f.contentWindow, 'frame');
const g = document.createElement('iframe'); g.src = 'http://` + ohost + `/frame'; document.body.appendChild(g);
try { window.open('http://` + ohost + `/popup'); } catch (e) {}
document.getElementById('a').click();
fetch('/allowed').then(r => r.text()).then(t => log('allowed: ' + t));
</script></body></html>`
	res := render(t, b, site.URL+"/page", htmlDoc(page), a)
	time.Sleep(time.Second) // anything that escaped has time to arrive
	dom := string(res.DOM)
	if !strings.Contains(dom, "allowed: allowed-body") {
		t.Errorf("the allowed fetch did not come through:\n%s", dom)
	}
	if n := outside.conns.Load() + outside.reqs.Load(); n != 0 {
		t.Errorf("the out-of-scope server saw %d connections and %d requests; want 0", outside.conns.Load(), outside.reqs.Load())
	}
	if c, d := site.conns.Load(), dials.Load(); c != d {
		t.Errorf("the site saw %d connections, the Answerer made %d: the page connected by itself", c, d)
	}
	if got := site.reqs.Load(); got != 1 {
		t.Errorf("the site saw %d requests, want 1 (the Answerer's /allowed)", got)
	}
	if res.Cut != CutNone {
		t.Errorf("Cut = %v, want none", res.Cut)
	}
	for _, u := range asked {
		if strings.Contains(u, "/ws") || strings.Contains(u, "/sse") || strings.Contains(u, "/beacon") || strings.Contains(u, "/ping") || strings.Contains(u, "prefetch") {
			t.Errorf("render passed %s to the Answerer; it must refuse it itself", u)
		}
	}
	log := dom
	if i := strings.Index(dom, `<ol id="log">`); i >= 0 {
		log = dom[i:]
		if j := strings.Index(log, "</ol>"); j >= 0 {
			log = log[:j]
		}
	}
	t.Logf("cut %v, took %v\nasked: %v\ntrap connections: %d\nlog: %s", res.Cut, res.Took, asked, b.escapes.Load(), log)
}
