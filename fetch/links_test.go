package fetch

import (
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/internal/urlnorm"
)

// linkStrings renders links as "URL" or "URL nofollow".
func linkStrings(ls Links) []string {
	out := make([]string, 0, len(ls.Links))
	for _, l := range ls.Links {
		s := l.URL.String()
		if l.NoFollow {
			s += " nofollow"
		}
		out = append(out, s)
	}
	return out
}

func TestExtractLinks(t *testing.T) {
	const page = "http://a.com/dir/page.html"
	tests := []struct {
		name     string
		header   http.Header
		ct       string
		body     string
		agent    string
		want     []string
		noindex  bool
		nofollow bool
		skipped  []string
	}{
		{
			name: "sources",
			body: `<a href="a1">x</a><area href="/area"><frame src="f.html"><iframe src="//cdn.b.com/i">inner <a href="raw">
				</iframe><link rel="canonical" href="/canon"><link rel="Next" href="?p=2"><link rel="prev" href="?p=0">
				<link rel="search" title="Search" href="search.html"><link rel="alternate" hreflang="de" href="/de/">
				<link rel="stylesheet" href="/style.css"><img src="/img.png"><script src="/s.js"></script><a name="anchor">`,
			want: []string{"http://a.com/dir/a1", "http://a.com/area", "http://a.com/dir/f.html", "http://cdn.b.com/i",
				"http://a.com/canon", "http://a.com/dir/page.html?p=2", "http://a.com/dir/page.html?p=0", "http://a.com/dir/search.html"},
		},
		{
			name: "relative forms",
			body: `<a href="../up">1</a><a href="./same">2</a><a href="?q=1">3</a><a href="#frag">4</a><a href="">5</a>
				<a href="  spaced  ">6</a><a href="HTTPS://Other.COM:443/x">7</a><a href="//b.com">8</a><a href="a&amp;b=%7e">9</a>`,
			want: []string{"http://a.com/up", "http://a.com/dir/same", "http://a.com/dir/page.html?q=1", "http://a.com/dir/page.html",
				"http://a.com/dir/spaced", "https://other.com/x", "http://b.com/", "http://a.com/dir/a&b=~"},
		},
		{
			name: "base href",
			body: `<html><head><a href="early">e</a><base target="_blank"><base href="http://base.com/sub/"><base href="/ignored/"></head>
				<body><a href="x">x</a><a href="/y">y</a></body>`,
			want: []string{"http://base.com/sub/early", "http://base.com/sub/x", "http://base.com/y"},
		},
		{
			name: "relative base href",
			body: `<BASE HREF="../other/"><a href="x">x</a>`,
			want: []string{"http://a.com/other/x"},
		},
		{
			name: "unusable base ignored",
			body: `<base href="javascript:void(0)"><a href="x">x</a>`,
			want: []string{"http://a.com/dir/x"},
		},
		{
			name: "base in comment or script ignored",
			body: `<!-- <base href="http://c.com/"> --><script>"<base href='http://d.com/'>"</script><a href="x">x</a>`,
			want: []string{"http://a.com/dir/x"},
		},
		{
			name: "rel nofollow",
			body: `<a href="/n" rel="nofollow">n</a><a href="/m" rel="external NoFollow noopener">m</a><a href="/u" rel="ugc">u</a>
				<area href="/ar" rel="nofollow">`,
			want: []string{"http://a.com/n nofollow", "http://a.com/m nofollow", "http://a.com/u", "http://a.com/ar nofollow"},
		},
		{
			name: "dedup keeps first position and follow wins",
			body: `<a href="/x" rel="nofollow">1</a><a href="/y">2</a><a href="http://A.com:80/x#f">3</a><a href="/y" rel="nofollow">4</a>
				<a href="/z" rel="nofollow"><a href="/z" rel="nofollow">`,
			want: []string{"http://a.com/x", "http://a.com/y", "http://a.com/z nofollow"},
		},
		{
			name:     "meta robots nofollow",
			body:     `<meta name="robots" content="index, NOFOLLOW"><a href="/x">x</a>`,
			want:     []string{"http://a.com/x nofollow"},
			nofollow: true,
		},
		{
			name:    "meta robots noindex",
			body:    `<a href="/x">x</a><meta name="ROBOTS" content="noindex">`,
			want:    []string{"http://a.com/x"},
			noindex: true,
		},
		{
			name:     "meta robots none",
			body:     `<meta name="robots" content="none"><a href="/x">x</a>`,
			want:     []string{"http://a.com/x nofollow"},
			noindex:  true,
			nofollow: true,
		},
		{
			name:     "meta for our agent",
			agent:    "CrawlBot",
			body:     `<meta name="crawlbot" content="noindex nofollow"><a href="/x">x</a>`,
			want:     []string{"http://a.com/x nofollow"},
			noindex:  true,
			nofollow: true,
		},
		{
			name:  "meta for another agent",
			agent: "crawlbot",
			body:  `<meta name="googlebot" content="noindex, nofollow"><meta name="description" content="nofollow"><a href="/x">x</a>`,
			want:  []string{"http://a.com/x"},
		},
		{
			name:     "x-robots-tag",
			header:   http.Header{"X-Robots-Tag": {"noarchive", "NoFollow"}},
			body:     `<a href="/x">x</a>`,
			want:     []string{"http://a.com/x nofollow"},
			nofollow: true,
		},
		{
			name:    "x-robots-tag agent forms",
			agent:   "crawlbot",
			header:  http.Header{"X-Robots-Tag": {"googlebot: nofollow, noindex", "CrawlBot: noindex", "otherbot: none"}},
			body:    `<a href="/x">x</a>`,
			want:    []string{"http://a.com/x"},
			noindex: true,
		},
		{
			name:     "x-robots-tag unavailable_after",
			header:   http.Header{"X-Robots-Tag": {"unavailable_after: Friday, 25-Jun-2010 15:00:00 PST, nofollow"}},
			body:     `<a href="/x">x</a>`,
			want:     []string{"http://a.com/x nofollow"},
			nofollow: true,
		},
		{
			name:    "x-robots-tag on non-html",
			ct:      "application/pdf",
			header:  http.Header{"X-Robots-Tag": {"none"}},
			body:    `<a href="/x">x</a>`,
			noindex: true, nofollow: true,
		},
		{
			name: "non-html not parsed",
			ct:   "text/plain",
			body: `<a href="/x">x</a>`,
		},
		{
			name: "xhtml parsed",
			ct:   "application/xhtml+xml; charset=utf-8",
			body: `<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body><a href="/x"/></body></html>`,
			want: []string{"http://a.com/x"},
		},
		{
			name:    "unusable refs skipped",
			body:    `<a href="javascript:void(0)">j</a><a href="mailto:me@a.com">m</a><a href="tel:+1">t</a><a href="http://[::x]/">v</a><a href="/ok">ok</a>`,
			want:    []string{"http://a.com/ok"},
			skipped: []string{"javascript:void(0)", "mailto:me@a.com", "tel:+1", "http://[::x]/"},
		},
		{
			name: "first duplicate attribute wins",
			body: `<a href="/first" href="/second">x</a>`,
			want: []string{"http://a.com/first"},
		},
		{
			name: "invalid utf-8 and entities",
			body: "<a href=\"/caf\xe9\">x</a><a href=\"/x?a=1&amp;b=2&lt;\">y</a>",
			want: []string{"http://a.com/caf%E9", "http://a.com/x?a=1&b=2%3C"},
		},
		{
			name: "unterminated markup",
			body: `<a href="/ok">x</a><a href="/cut`,
			want: []string{"http://a.com/ok"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct := tt.ct
			if ct == "" {
				ct = "text/html"
			}
			got := ExtractLinks(mustURL(t, page), tt.header, ct, []byte(tt.body), tt.agent)
			if g := linkStrings(got); strings.Join(g, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("links:\n got %q\nwant %q", g, tt.want)
			}
			if got.NoIndex != tt.noindex || got.NoFollow != tt.nofollow {
				t.Errorf("NoIndex %v NoFollow %v, want %v %v", got.NoIndex, got.NoFollow, tt.noindex, tt.nofollow)
			}
			var skipped []string
			for _, s := range got.Skipped {
				skipped = append(skipped, s.Ref)
				if s.Err == nil {
					t.Errorf("skip %q without error", s.Ref)
				}
			}
			if strings.Join(skipped, "\n") != strings.Join(tt.skipped, "\n") {
				t.Errorf("skipped %q, want %q", skipped, tt.skipped)
			}
		})
	}
}

func TestExtractLinksSkipReasons(t *testing.T) {
	long := "/" + strings.Repeat("x", urlnorm.MaxLength)
	body := `<a href="javascript:x">j</a><a href="` + long + `">l</a>`
	got := ExtractLinks(mustURL(t, "http://a.com/"), nil, "text/html", []byte(body), "")
	if len(got.Skipped) != 2 || !errors.Is(got.Skipped[0].Err, urlnorm.ErrScheme) || !errors.Is(got.Skipped[1].Err, urlnorm.ErrTooLong) {
		t.Fatalf("skipped = %+v", got.Skipped)
	}
	if len(got.Skipped[1].Ref) != maxSkipRef {
		t.Errorf("long ref kept as %d bytes, want %d", len(got.Skipped[1].Ref), maxSkipRef)
	}

	var b strings.Builder
	for i := range MaxSkipped + 10 {
		fmt.Fprintf(&b, `<a href="mailto:%d@a.com">`, i)
	}
	got = ExtractLinks(mustURL(t, "http://a.com/"), nil, "text/html", []byte(b.String()), "")
	if len(got.Skipped) != MaxSkipped {
		t.Errorf("kept %d skips, want %d", len(got.Skipped), MaxSkipped)
	}
}

func TestExtractLinksCap(t *testing.T) {
	var b strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&b, "<a href=/%d><a href=/%d>", i, i%10) // each new link, then a repeat of an early one
	}
	b.WriteString(`<meta name=robots content=nofollow>`)
	got := extractLinks(mustURL(t, "http://a.com/"), nil, "text/html", []byte(b.String()), "", 1000)
	if len(got.Links) != 1000 {
		t.Fatalf("kept %d links, want 1000", len(got.Links))
	}
	// Links 0..999 fill the cap at the 1000th distinct one (i=999), whose
	// repeat and the 2*500 references after it are dropped unresolved.
	if got.Dropped != 1+2*500 {
		t.Errorf("Dropped = %d, want %d", got.Dropped, 1+2*500)
	}
	if got.Links[999].URL.Path != "/999" || !got.Links[999].NoFollow || !got.NoFollow {
		t.Errorf("last link %v nofollow %v, page nofollow %v", got.Links[999].URL, got.Links[999].NoFollow, got.NoFollow)
	}
}

// A page with a million links keeps MaxLinks of them, and costs memory for
// those only: the tokenizer and the dropped references leave nothing behind.
// Skipped under the race detector, which distorts both time and memory.
func TestExtractLinksMemory(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("memory measurement; skipped with -race and -short")
	}
	const n = 1_000_000
	var b strings.Builder
	b.Grow(n * 16)
	for i := range n {
		fmt.Fprintf(&b, "<a href=/%d>", i)
	}
	body := []byte(b.String())
	b.Reset()
	base := mustURL(t, "http://a.com/")

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got := ExtractLinks(base, nil, "text/html", body, "")
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(body)
	if len(got.Links) != MaxLinks || got.Dropped != n-MaxLinks {
		t.Fatalf("kept %d dropped %d, want %d %d", len(got.Links), got.Dropped, MaxLinks, n-MaxLinks)
	}
	live := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d-byte page with %d links, %d kept: %.1f MiB live after, %.1f MiB allocated", len(body), n, len(got.Links),
		float64(live)/(1<<20), float64(after.TotalAlloc-before.TotalAlloc)/(1<<20))
	// About 190 bytes live per kept link (url.URL, its strings, the slice).
	if live > 40<<20 {
		t.Errorf("%d bytes live for %d links", live, len(got.Links))
	}
	runtime.KeepAlive(got)
}

func FuzzExtractLinks(f *testing.F) {
	for _, s := range []string{
		`<a href="x">`, `<base href="/b/"><a href="../y" rel=nofollow>`, `<meta name=robots content=none>`,
		"<a href=\"\xff\xfe\">", `<iframe src="//h/"><a href=z></iframe>`, `<!--<a href=c>-->`, `<a href="javascript:x">`,
		`<link rel="canonical next" href="?p=2">`, `<svg><a href="s"></svg>`, `<a href=x><a href=x>`,
	} {
		f.Add(s, "noindex", "crawl")
	}
	base, _ := urlnorm.Parse("http://example.com/dir/page")
	f.Fuzz(func(t *testing.T, body, xrobots, agent string) {
		h := http.Header{"X-Robots-Tag": {xrobots}}
		got := ExtractLinks(base, h, "text/html", []byte(body), agent)
		if len(got.Links) > MaxLinks || len(got.Skipped) > MaxSkipped || got.Dropped < 0 {
			t.Fatalf("bounds: %d links, %d skipped", len(got.Links), len(got.Skipped))
		}
		seen := map[string]bool{}
		for _, l := range got.Links {
			s := l.URL.String()
			if seen[s] {
				t.Fatalf("duplicate %q", s)
			}
			seen[s] = true
			u, err := urlnorm.Parse(s)
			if err != nil || u.String() != s {
				t.Fatalf("link %q not normalized: %v %v", s, u, err)
			}
			if got.NoFollow && !l.NoFollow {
				t.Fatalf("page nofollow but link %q followed", s)
			}
		}
		for _, sk := range got.Skipped {
			if sk.Err == nil || len(sk.Ref) > maxSkipRef {
				t.Fatalf("bad skip %+v", sk)
			}
		}
	})
}
