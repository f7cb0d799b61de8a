package fetch

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/internal/urlnorm"
)

func TestExtractBlocking(t *testing.T) {
	base, _ := urlnorm.Parse("http://example.com/dir/page")
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"document order", `<link rel=stylesheet href=/a.css><script src="b.js" defer></script><img src=/i.png><link rel="Preload StyleSheet" href="/c.css">`,
			[]string{"http://example.com/a.css", "http://example.com/dir/b.js", "http://example.com/c.css"}},
		{"base href", `<base href="http://cdn.example/x/"><script src=app.js></script>`, []string{"http://cdn.example/x/app.js"}},
		{"once each", `<script src=/a.js></script><script src="/a.js"></script>`, []string{"http://example.com/a.js"}},
		{"script types", `<script type="text/javascript" src=/1.js></script><script type=" Application/JavaScript " src=/2.js></script>` +
			`<script type=module src=/m.js></script><script type="application/ld+json" src=/d.json></script><script type="text/template" src=/t.js></script>` +
			`<script type="text/javascript; charset=utf-8" src=/p.js></script><script nomodule src=/old.js></script><script>inline()</script>`,
			[]string{"http://example.com/1.js", "http://example.com/2.js"}},
		{"cors", `<script crossorigin src=/c.js></script><link rel=stylesheet crossorigin=anonymous href=/c.css>`, nil},
		{"not stylesheets", `<link rel="alternate stylesheet" href=/alt.css><link rel=stylesheet disabled href=/off.css><link rel=icon href=/f.ico><link rel=preload as=style href=/p.css><link rel=stylesheet>`, nil},
		{"inert", `<template><script src=/t.js></script><template></template><link rel=stylesheet href=/t.css></template><noscript><link rel=stylesheet href=/n.css></noscript><script src=/after.js></script>`,
			[]string{"http://example.com/after.js"}},
		{"comments and raw text", `<!-- <script src=/c.js></script> --><script>document.write('<script src=/w.js><\/script>')</script><textarea><script src=/x.js></script></textarea>`, nil},
		{"unusable", `<script src="javascript:void(0)"></script><script src="  /ok.js "></script>`, []string{"http://example.com/ok.js"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, b := range ExtractBlocking(base, []byte(tc.body)) {
				if want := BlockingKind(map[bool]int{true: int(BlockingScript)}[strings.HasSuffix(b.URL.Path, ".js")]); b.Kind != want {
					t.Errorf("%s: kind %d, want %d", b.URL, b.Kind, want)
				}
				got = append(got, b.URL.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestExtractBlockingBound: a page naming more scripts than MaxBlocking gives the first ones.
func TestExtractBlockingBound(t *testing.T) {
	base, _ := urlnorm.Parse("http://example.com/")
	var b strings.Builder
	for i := range 3 * MaxBlocking {
		fmt.Fprintf(&b, `<script src="/s%d.js"></script>`, i)
	}
	got := ExtractBlocking(base, []byte(b.String()))
	if len(got) != MaxBlocking || got[0].URL.Path != "/s0.js" || got[MaxBlocking-1].URL.Path != fmt.Sprintf("/s%d.js", MaxBlocking-1) {
		t.Errorf("%d references from %v to %v, want the first %d", len(got), got[0].URL, got[len(got)-1].URL, MaxBlocking)
	}
}

func FuzzExtractBlocking(f *testing.F) {
	for _, s := range []string{
		`<script src=a.js></script>`, `<base href="/b/"><link rel=stylesheet href=../s.css>`, `<template><script src=x></template>`,
		`</template><script src=y>`, "<script src=\"\xff\">", `<link rel=stylesheet href=a><link rel=stylesheet href=a>`,
	} {
		f.Add(s)
	}
	base, _ := urlnorm.Parse("http://example.com/dir/page")
	f.Fuzz(func(t *testing.T, body string) {
		got := ExtractBlocking(base, []byte(body))
		if len(got) > MaxBlocking {
			t.Fatalf("%d references", len(got))
		}
		seen := map[string]bool{}
		for _, b := range got {
			s := b.URL.String()
			if seen[s] {
				t.Fatalf("duplicate %q", s)
			}
			seen[s] = true
			if p, err := urlnorm.Parse(s); err != nil || p.String() != s || (p.Scheme != "http" && p.Scheme != "https") {
				t.Fatalf("reference %q not a normalized http(s) URL: %v", s, err)
			}
		}
	})
}
