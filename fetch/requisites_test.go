package fetch

import (
	"fmt"
	"testing"
)

func TestExtractRequisites(t *testing.T) {
	base := mustURL(t, "http://a.example/dir/page.html")
	for _, tt := range []struct {
		name, ctype, body string
		want              []string
	}{
		{"head", "text/html", `<head><link rel="stylesheet" href="s.css"><link rel="shortcut icon" href="/favicon.ico">
<link rel=preload as=image href=hero.png imagesrcset="hero.png 1x, hero@2x.png 2x"><link rel=canonical href=/other>
<link rel=next href=p2><script src="/js/app.js"></script><script>var u = "url(no.png)"</script></head>`,
			[]string{"http://a.example/dir/s.css", "http://a.example/favicon.ico", "http://a.example/dir/hero.png",
				"http://a.example/dir/hero@2x.png", "http://a.example/js/app.js"}},
		{"hyperlink rels are links, not requisites, as for wget -p", "text/html",
			`<link rel="search" type="application/opensearchdescription+xml" href="/opensearch.xml" title="s">
<link rel="search" title="Search" href="search.html"><link rel=alternate hreflang=de href=/de/><link rel=help href=/help>
<link rel="alternate stylesheet" href="alt.css" title="alt">`,
			[]string{"http://a.example/dir/alt.css"}},
		{"images and picture", "text/html", `<img src="a.png" srcset="a.png 1x, b,c.png 2x, d.png 100w"><picture>
<source srcset="e.avif" type="image/avif"><source srcset="f.webp 1x,g.webp 2x"><img src=h.jpg></picture>
<input type=image src=i.png><input type=text src=no.png><a href=link.html>not a requisite</a>`,
			[]string{"http://a.example/dir/a.png", "http://a.example/dir/b,c.png", "http://a.example/dir/d.png",
				"http://a.example/dir/e.avif", "http://a.example/dir/f.webp", "http://a.example/dir/g.webp",
				"http://a.example/dir/h.jpg", "http://a.example/dir/i.png"}},
		{"media and objects", "text/html", `<video src=v.mp4 poster=v.jpg><track src=v.vtt></video><audio src=a.mp3></audio>
<embed src=e.swf><object data=o.svg></object><body background=bg.gif>`,
			[]string{"http://a.example/dir/v.mp4", "http://a.example/dir/v.jpg", "http://a.example/dir/v.vtt",
				"http://a.example/dir/a.mp3", "http://a.example/dir/e.swf", "http://a.example/dir/o.svg", "http://a.example/dir/bg.gif"}},
		{"css in html", "text/html", `<style>@import "i.css"; body{background:url(bg.png)}</style>
<div style="background-image: url('/d.png')"></div><!-- <img src=comment.png> -->`,
			[]string{"http://a.example/dir/i.css", "http://a.example/dir/bg.png", "http://a.example/d.png"}},
		{"base and duplicates", "text/html", `<base href="http://cdn.example/x/"><img src=a.png><img src=a.png><img src="javascript:x">`,
			[]string{"http://cdn.example/x/a.png"}},
		{"stylesheet", "text/css; charset=utf-8", `@import url(print.css); @font-face{src:url(../f.woff2)} a{b:url(data:image/png;base64,AA)}`,
			[]string{"http://a.example/dir/print.css", "http://a.example/f.woff2"}},
		{"other types have none", "image/png", `<img src=a.png>`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ExtractRequisites(base, tt.ctype, []byte(tt.body))
			var urls []string
			for _, l := range got.Links {
				urls = append(urls, l.URL.String())
			}
			if fmt.Sprint(urls) != fmt.Sprint(tt.want) {
				t.Errorf("got  %q\nwant %q", urls, tt.want)
			}
		})
	}
}
