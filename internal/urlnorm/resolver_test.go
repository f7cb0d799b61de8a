package urlnorm

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// sameAsResolve fails t unless rs (for base) resolves each ref as Resolve does: the same URL
// (every field), its String(), and the same error. The results are compared after all refs
// were resolved, so a result spoiled by the Resolver's reuse of its buffers shows.
func sameAsResolve(t *testing.T, base *url.URL, rs *Resolver, refs ...string) {
	t.Helper()
	type got struct {
		u   *url.URL
		s   string
		err error
	}
	var gots []got
	for _, ref := range refs {
		u, s, err := rs.Resolve(ref)
		gots = append(gots, got{u, s, err})
	}
	for i, ref := range refs {
		want, werr := Resolve(base, ref)
		g := gots[i]
		switch {
		case (werr == nil) != (g.err == nil) || werr != nil && werr.Error() != g.err.Error():
			t.Errorf("base %v, ref %q: error %v, Resolve gives %v", base, ref, g.err, werr)
		case werr != nil:
		case !reflect.DeepEqual(*g.u, *want) || g.s != want.String() || g.u.String() != g.s:
			t.Errorf("base %v, ref %q: %#v (%q), Resolve gives %#v (%q)", base, ref, *g.u, g.s, *want, want.String())
		}
	}
}

var resolverRefs = []string{
	"", "g", "./g", "g/", "/g", "//g", "?y", "g?y", "#s", "g#s", "g?y#s", ";x", "g;x", "g;x?y#s",
	".", "./", "..", "../", "../g", "../..", "../../g", "../../../g", "/./g", "/../g", "g.", ".g", "g..",
	"..g", "./../g", "./g/.", "g/./h", "g/../h", "g;x=1/./y", "g;x=1/../y", "g?y/./x", "g?y/../x",
	"http:g", "http://A.COM:80/%7e%41?%zz#f", "HTTPS://b.com:443", "https://[::1]:8443/a b", `\\c\d\e`,
	"//u:p@h.com/x", "//@h.com/", "//h.com:/", "//h.com:99999/", "javascript:alert(1)", "mailto:x@y",
	" \t/a\nb\r ", "%2e%2E/x", "/a/%2e%2e/b", "ü/€?ö=ß", "//Bücher.example/", "//a..b/", "//[zz]/",
	"?", "/?", "g?", "p123456", "/p7?q=1&r=%20", "http://x.com/" + strings.Repeat("a", 2100),
	"http://x.com/" + strings.Repeat("%41", 700), "//x_y.com/", "http://x.com/a%2Fb", "http://x.com/%",
}

// TestResolverMatchesResolve checks Resolver against Resolve over bases of every shape
// (a query, no path, userinfo, a port, a non-http scheme, none) and RFC 3986 §5.4's examples.
func TestResolverMatchesResolve(t *testing.T) {
	for _, b := range []string{
		"http://a/b/c/d;p?q", "http://a.com", "https://a.com:8443/x/y/", "http://u:p@a.com/d/", "http://a.com/?",
		"http://a.com/a%20b/c%2Fd", "http://[::1]/x", "ftp://a.com/x",
	} {
		base, err := url.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		sameAsResolve(t, base, NewResolver(base), resolverRefs...)
	}
	sameAsResolve(t, nil, NewResolver(nil), resolverRefs...)
}

// FuzzResolver compares Resolver with Resolve on any base and references.
func FuzzResolver(f *testing.F) {
	for _, r := range resolverRefs {
		f.Add("http://a/b/c/d;p?q", r, "../x")
	}
	f.Add("http://u:p@a.com/%zz/", "g?%", "//b/")
	f.Fuzz(func(t *testing.T, b, ref1, ref2 string) {
		base, err := Parse(b)
		if err != nil {
			if base, err = url.Parse(b); err != nil {
				return
			}
		}
		sameAsResolve(t, base, NewResolver(base), ref1, ref2, ref1)
	})
}

func BenchmarkResolverVsResolve(b *testing.B) {
	base, _ := Parse("http://127.0.0.1:40123/section/p123456")
	refs := []string{"p1234", "/p98765", "http://127.0.0.1:40124/p5", "../a/b?c=d", "p123#x"}
	b.Run("Resolve", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			u, _ := Resolve(base, refs[i%len(refs)])
			_ = u.String()
		}
	})
	b.Run("Resolver", func(b *testing.B) {
		b.ReportAllocs()
		rs := NewResolver(base)
		for i := 0; b.Loop(); i++ {
			rs.Resolve(refs[i%len(refs)])
		}
	})
}
