package cssref

import (
	"fmt"
	"testing"
)

func TestRefs(t *testing.T) {
	for _, tt := range []struct {
		name, css string
		want      []string
	}{
		{"url forms", `a{background:url(a.png)} b{background:URL( "b.png" )} c{x:url('c.png')}`, []string{"a.png", "b.png", "c.png"}},
		{"import string and url", `@import "one.css"; @IMPORT url(two.css) screen; @import 'three.css';`, []string{"one.css", "two.css", "three.css"}},
		{"font-face src", `@font-face{font-family:x;src:url(f.woff2) format("woff2"),url("f.woff") format("woff")}`, []string{"f.woff2", "f.woff"}},
		{"not in comments or strings", `/* url(no.png) @import "no.css"; */ a::after{content:"url(no2.png)"} b{x:url(yes.png)}`, []string{"yes.png"}},
		{"strings elsewhere are not URLs", `a{font-family:"Open Sans"} @charset "utf-8";`, nil},
		{"escapes", `a{x:url(sp\ ace.png)} b{x:url("\66 oo.png")} c{x:url(a\)b.png)}`, []string{"sp ace.png", "foo.png", "a)b.png"}},
		{"image-set", `a{background-image:image-set("a1.png" 1x, url(a2.png) 2x, "a3.avif" type("image/avif"))}`, []string{"a1.png", "a2.png", "a3.avif"}},
		{"bad url is skipped", `a{x:url(bad url.png)} b{x:url(ok.png)}`, []string{"ok.png"}},
		{"unterminated", `a{x:url("cut.png`, []string{"cut.png"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			refs := Refs([]byte(tt.css))
			var got []string
			for _, r := range refs {
				got = append(got, r.URL)
				if r.Start < 0 || r.End > len(tt.css) || r.Start >= r.End {
					t.Errorf("ref %q spans %d..%d", r.URL, r.Start, r.End)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("Refs(%s) = %q, want %q", tt.css, got, tt.want)
			}
		})
	}
}

// TestRefSpans: the span of a reference is its whole url(…) token or its quoted string.
func TestRefSpans(t *testing.T) {
	css := `@import "a.css"; b { background: url( 'b.png' ) }`
	refs := Refs([]byte(css))
	if len(refs) != 2 || css[refs[0].Start:refs[0].End] != `"a.css"` || refs[0].Func ||
		css[refs[1].Start:refs[1].End] != `url( 'b.png' )` || !refs[1].Func {
		t.Fatalf("refs %+v", refs)
	}
}

// TestRefsLeaveTheArrayAlone: the byte after the stylesheet in its array is not touched (the
// lexer's NUL sentinel would otherwise land there).
func TestRefsLeaveTheArrayAlone(t *testing.T) {
	buf := []byte(`a{b:url(x.png)}<rest`)
	Refs(buf[:15])
	if string(buf) != `a{b:url(x.png)}<rest` {
		t.Errorf("the array now holds %q", buf)
	}
}

func FuzzRefs(f *testing.F) {
	f.Add(`@import "a.css"; a{b:url(x) image-set("y" 1x)}`)
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range Refs([]byte(s)) {
			if r.Start < 0 || r.End > len(s) || r.Start >= r.End {
				t.Fatalf("ref %+v out of %d bytes", r, len(s))
			}
		}
	})
}
