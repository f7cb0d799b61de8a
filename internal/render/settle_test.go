//go:build linux

package render

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// settleQuietTest is the quiet time of the settle tests: far longer than a settled page takes,
// so that a page that ends sooner can only have been settled.
const settleQuietTest = 3 * time.Second

// settleAnswerer answers /api/* with a JSON body naming the path, /late.js with a script, and
// an image for /img.png; anything else fails.
func settleAnswerer() Answerer {
	return AnswererFunc(func(ctx context.Context, r *Request) (*Response, error) {
		switch {
		case strings.Contains(r.URL, "/api/"):
			name := r.URL[strings.LastIndex(r.URL, "/")+1:]
			return &Response{Status: 200, Header: map[string][]string{"Content-Type": {"application/json"}},
				Body: []byte(`{"next": "` + name + `-next", "text": "text of ` + name + `"}`)}, nil
		case strings.HasSuffix(r.URL, "/img.png"):
			return &Response{Status: 200, Header: map[string][]string{"Content-Type": {"image/png"}}, Body: []byte(tinyPNGForTests)}, nil
		}
		return nil, errors.New("no")
	})
}

// tinyPNGForTests is a 1×1 transparent PNG.
const tinyPNGForTests = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82"

// TestSettleBeforeQuiet: a page whose script has made its one request, written its answer and
// left nothing pending ends well before the quiet time; a page that still has a request to
// come (a timer due within the quiet time, a chain of requests, an image whose load handler
// makes one, a request sent from an animation frame or an idle callback) ends only after it
// was answered, with
// its content in the DOM; a page that asks for animation frames without end waits the quiet
// time.
func TestSettleBeforeQuiet(t *testing.T) {
	b := startBrowser(t, Options{Tabs: 1, Quiet: settleQuietTest})
	const show = `function show(d) { const p = document.createElement("p"); p.textContent = d.text; document.body.appendChild(p); }
function get(n) { return fetch("/api/" + n).then(r => r.json()).then(d => { show(d); return d; }); }
`
	for _, tc := range []struct {
		name, script string
		want         []string // texts the DOM must hold
		settles      bool     // ends before the quiet time
	}{
		{"one request", `get("a");`, []string{"text of a"}, true},
		{"a timer after the answer", `get("a").then(() => setTimeout(() => get("b"), 400));`, []string{"text of a", "text of b"}, true},
		{"a chain", `get("a").then(d => get(d.next)).then(d => get(d.next));`, []string{"text of a", "text of a-next", "text of a-next-next"}, true},
		{"an image's load handler", `get("a").then(() => { const i = new Image(); i.onload = () => get("c"); i.src = "/img.png"; document.body.appendChild(i); });`, []string{"text of a", "text of c"}, true},
		{"an animation frame", `get("a").then(() => requestAnimationFrame(() => requestAnimationFrame(() => get("d"))));`, []string{"text of a", "text of d"}, true},
		{"an idle callback", `get("a").then(() => requestIdleCallback(() => setTimeout(() => get("e"), 200)));`, []string{"text of a", "text of e"}, true},
		{"an animation that never ends", `get("a"); (function f() { requestAnimationFrame(f); })();`, []string{"text of a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := &Response{Status: 200, Header: map[string][]string{"Content-Type": {"text/html"}},
				Body: []byte(`<html><body><script>` + show + tc.script + `</script></body></html>`)}
			res, err := b.Render(context.Background(), "http://settle.test/", doc, settleAnswerer())
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(res.DOM), "<p>"+w+"</p>") {
					t.Errorf("the DOM lacks %q: %s", w, res.DOM)
				}
			}
			if ended := res.Took < settleQuietTest; ended != tc.settles {
				t.Errorf("took %v with a quiet time of %v; want ended before it: %v", res.Took, settleQuietTest, tc.settles)
			}
		})
	}
}
