package crawler

import (
	"strings"
	"testing"
)

func TestNeedsRender(t *testing.T) {
	long := strings.Repeat("Words of a real article, written on the server. ", 10)
	for _, tc := range []struct {
		name string
		body string
		want bool
	}{
		{"shell", `<!doctype html><title>App</title><div id="app">Loading…</div><script src="/app.js"></script>`, true},
		{"inline script shell", `<html><body><div id=root></div><script>render()</script></body></html>`, true},
		{"noscript text is not content", `<div id=app></div><noscript>` + long + `</noscript><script src=a.js></script>`, true},
		{"script text is not content", `<div id=app></div><script>var s = "` + long + `";</script>`, true},
		{"article with scripts", `<title>A</title><p>` + long + `</p><script src=/analytics.js></script>`, false},
		{"no script", `<div id=app>Loading…</div>`, false},
		{"empty", ``, false},
		{"self-closing script tags count", `<script src=a.js /><div></div>`, true},
		{"unclosed style hides the rest", `<script></script><style>` + long, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := needsRender([]byte(tc.body)); got != tc.want {
				t.Errorf("needsRender(%.60q) = %v, want %v", tc.body, got, tc.want)
			}
		})
	}
}

func FuzzNeedsRender(f *testing.F) {
	f.Add([]byte(`<div id=app></div><script src=a.js></script>`))
	f.Add([]byte(`<p>text</p>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		needsRender(b) // must not panic nor loop
	})
}
