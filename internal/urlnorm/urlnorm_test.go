package urlnorm

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "http://example.com/", "http://example.com/"},
		{"empty path", "http://example.com", "http://example.com/"},
		{"case", "HTTP://Example.COM/Path", "http://example.com/Path"},
		{"whitespace", "  \t http://a.com/x \n", "http://a.com/x"},
		{"controls trimmed", "\x00\x1fhttp://a.com/\x01", "http://a.com/"},
		{"tab cr lf inside", "ht\ttp://a.\ncom/p\ra\nth", "http://a.com/path"},
		{"default port http", "http://a.com:80/x", "http://a.com/x"},
		{"default port https", "https://a.com:443/x", "https://a.com/x"},
		{"other default kept", "https://a.com:80/x", "https://a.com:80/x"},
		{"port kept", "http://a.com:8080/x", "http://a.com:8080/x"},
		{"port leading zeros", "http://a.com:0080/x", "http://a.com/x"},
		{"empty port", "http://a.com:/x", "http://a.com/x"},
		{"fragment dropped", "http://a.com/x#frag", "http://a.com/x"},
		{"fragment with query", "http://a.com/x?q=1#frag?z", "http://a.com/x?q=1"},
		{"query without path", "http://a.com?x=1", "http://a.com/?x=1"},
		{"fragment without path", "http://a.com#x", "http://a.com/"},
		{"empty query dropped", "http://a.com/x?", "http://a.com/x"},
		{"dot segments", "http://a.com/a/b/../c/./d", "http://a.com/a/c/d"},
		{"dot segments above root", "http://a.com/../../x", "http://a.com/x"},
		{"trailing dotdot", "http://a.com/a/b/..", "http://a.com/a/"},
		{"trailing dot", "http://a.com/a/.", "http://a.com/a/"},
		{"encoded dots", "http://a.com/a/%2E%2e/b", "http://a.com/b"},
		{"double slash kept", "http://a.com/a//b", "http://a.com/a//b"},
		{"hex upper", "http://a.com/%c3%a9?x=%c3%a9", "http://a.com/%C3%A9?x=%C3%A9"},
		{"unreserved decoded", "http://a.com/%7Euser/%41%2d%5F", "http://a.com/~user/A-_"},
		{"reserved kept", "http://a.com/a%2Fb?x=%26%3D", "http://a.com/a%2Fb?x=%26%3D"},
		{"reserved literal kept", "http://a.com/a:b@c;d=e,f!$&'()*+", "http://a.com/a:b@c;d=e,f!$&'()*+"},
		{"space encoded", "http://a.com/a b?c d", "http://a.com/a%20b?c%20d"},
		{"plus kept in query", "http://a.com/?q=a+b", "http://a.com/?q=a+b"},
		{"stray percent", "http://a.com/100%?x=%zz", "http://a.com/100%25?x=%25zz"},
		{"non-ascii path", "http://a.com/café", "http://a.com/caf%C3%A9"},
		{"invalid utf8 path", "http://a.com/\xff", "http://a.com/%FF"},
		{"brackets in path", "http://a.com/[x]{y}|", "http://a.com/%5Bx%5D%7By%7D%7C"},
		{"query question mark", "http://a.com/?a?b=/c", "http://a.com/?a?b=/c"},
		{"query order kept", "http://a.com/?b=2&a=1", "http://a.com/?b=2&a=1"},
		{"idn", "http://Bücher.example/", "http://xn--bcher-kva.example/"},
		{"idn fullwidth dot", "http://例え。テスト/", "http://xn--r8jz45g.xn--zckzah/"},
		{"percent host", "http://%65xample.com/", "http://example.com/"},
		{"underscore host", "http://my_host.a.com/", "http://my_host.a.com/"},
		{"hyphens host", "http://r3---sn-x.a.com/", "http://r3---sn-x.a.com/"},
		{"punycode host", "http://XN--BCHER-KVA.example/", "http://xn--bcher-kva.example/"},
		{"ipv4", "http://127.0.0.1:8080/", "http://127.0.0.1:8080/"},
		{"ipv6 canonical", "http://[2001:DB8:0:0:0:0:0:1]:80/", "http://[2001:db8::1]/"},
		{"ipv6 port", "https://[::1]:8443/x", "https://[::1]:8443/x"},
		{"userinfo kept", "http://user:pw@a.com/", "http://user:pw@a.com/"},
		{"empty userinfo", "http://@a.com/", "http://a.com/"},
		{"backslashes", `http:\\a.com\b\c?d\e`, `http://a.com/b/c?d%5Ce`},
		{"trailing dot host kept", "http://a.com./", "http://a.com./"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if got := u.String(); got != tt.want {
				t.Errorf("Parse(%q) = %q, want %q", tt.in, got, tt.want)
			}
			again, err := Parse(u.String())
			if err != nil || again.String() != u.String() {
				t.Errorf("not idempotent: %q -> %v, %v", u, again, err)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     error
		msg      string // substring of the message
	}{
		{"mailto", "mailto:a@b.com", ErrScheme, `"mailto"`},
		{"javascript", "javascript:void(0)", ErrScheme, `"javascript"`},
		{"javascript spaced", "  JavaScript:alert(1)", ErrScheme, `"javascript"`},
		{"data", "data:text/html,hi", ErrScheme, `"data"`},
		{"tel", "tel:+123", ErrScheme, `"tel"`},
		{"ftp", "ftp://a.com/", ErrScheme, `"ftp"`},
		{"relative", "/path", ErrScheme, "no scheme"},
		{"schemeless host", "example.com/x", ErrScheme, "no scheme"},
		{"empty", "", ErrScheme, "no scheme"},
		{"no authority", "http:foo", ErrNoHost, ""},
		{"empty host", "http:///path", ErrNoHost, ""},
		{"port only", "https://:443/", ErrNoHost, ""},
		{"bad port", "http://a.com:8x/", ErrParse, "port"},
		{"port too big", "http://a.com:65536/", ErrParse, "port"},
		{"port zero", "http://a.com:0/", ErrParse, "port"},
		{"bad ipv6", "http://[::g]/", ErrParse, "IPv6"},
		{"unclosed ipv6", "http://[::1/", ErrParse, "IPv6"},
		{"ipv4 in brackets", "http://[1.2.3.4]/", ErrParse, "IPv6"},
		{"zone", "http://[fe80::1%25eth0]/", ErrParse, "IPv6"},
		{"space in host", "http://a b.com/", ErrParse, "host"},
		{"empty label", "http://a..com/", ErrParse, "label"},
		{"bad host escape", "http://a%zz.com/", ErrParse, "host"},
		{"bad idn", "http://a\xffb.com/", ErrParse, "host"},
		{"too long", "http://a.com/" + strings.Repeat("x", MaxLength), ErrTooLong, ""},
		{"too long after encoding", "http://a.com/" + strings.Repeat(" ", MaxLength/2) + "x", ErrTooLong, ""},
		{"huge input", "http://a.com/" + strings.Repeat("%7E", 10*MaxLength), ErrTooLong, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := Parse(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse(%q) = %v, %v; want error %v", tt.in, u, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not mention %q", err, tt.msg)
			}
		})
	}
}

func TestLengthBoundary(t *testing.T) {
	prefix := "http://a.com/"
	ok := prefix + strings.Repeat("x", MaxLength-len(prefix))
	if u, err := Parse(ok); err != nil || len(u.String()) != MaxLength {
		t.Fatalf("Parse(%d bytes) = %v, %v", len(ok), u, err)
	}
	if _, err := Parse(ok + "x"); !errors.Is(err, ErrTooLong) {
		t.Fatalf("Parse(%d bytes) err = %v, want ErrTooLong", len(ok)+1, err)
	}
	// Decoding shrinks: a raw string over MaxLength may normalize under it.
	shrinks := prefix + strings.Repeat("%7E", 600)
	if u, err := Parse(shrinks); err != nil || u.String() != prefix+strings.Repeat("~", 600) {
		t.Fatalf("Parse(shrinking) = %v, %v", u, err)
	}
}

func TestResolve(t *testing.T) {
	// RFC 3986 §5.4 examples; results differ from the RFC only where
	// normalization applies (fragment dropped, empty path "/").
	base := mustParse(t, "http://a/b/c/d;p?q")
	tests := []struct{ ref, want string }{
		{"g", "http://a/b/c/g"},
		{"./g", "http://a/b/c/g"},
		{"g/", "http://a/b/c/g/"},
		{"/g", "http://a/g"},
		{"//g", "http://g/"},
		{"?y", "http://a/b/c/d;p?y"},
		{"g?y", "http://a/b/c/g?y"},
		{"#s", "http://a/b/c/d;p?q"},
		{"g#s", "http://a/b/c/g"},
		{"g?y#s", "http://a/b/c/g?y"},
		{";x", "http://a/b/c/;x"},
		{"g;x", "http://a/b/c/g;x"},
		{"g;x?y#s", "http://a/b/c/g;x?y"},
		{"", "http://a/b/c/d;p?q"},
		{".", "http://a/b/c/"},
		{"./", "http://a/b/c/"},
		{"..", "http://a/b/"},
		{"../", "http://a/b/"},
		{"../g", "http://a/b/g"},
		{"../..", "http://a/"},
		{"../../", "http://a/"},
		{"../../g", "http://a/g"},
		// §5.4.2 abnormal examples
		{"../../../g", "http://a/g"},
		{"../../../../g", "http://a/g"},
		{"/./g", "http://a/g"},
		{"/../g", "http://a/g"},
		{"g.", "http://a/b/c/g."},
		{".g", "http://a/b/c/.g"},
		{"g..", "http://a/b/c/g.."},
		{"..g", "http://a/b/c/..g"},
		{"./../g", "http://a/b/g"},
		{"./g/.", "http://a/b/c/g/"},
		{"g/./h", "http://a/b/c/g/h"},
		{"g/../h", "http://a/b/c/h"},
		{"g;x=1/./y", "http://a/b/c/g;x=1/y"},
		{"g;x=1/../y", "http://a/b/c/y"},
		{"g?y/./x", "http://a/b/c/g?y/./x"},
		{"g#s/./x", "http://a/b/c/g"},
		{"http:g", ""}, // strict parsers: error (no authority), see below
		// ours
		{"HTTPS://Other.example:443/x", "https://other.example/x"},
		{"  g h  ", "http://a/b/c/g%20h"},
		{`\g\h`, "http://a/g/h"},
		{`\\evil.example\x`, "http://evil.example/x"},
		{"%2e%2E/g", "http://a/b/g"},
		{"?", "http://a/b/c/d;p"},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			u, err := Resolve(base, tt.ref)
			if tt.want == "" {
				if !errors.Is(err, ErrNoHost) {
					t.Fatalf("Resolve(%q) = %v, %v; want ErrNoHost", tt.ref, u, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tt.ref, err)
			}
			if got := u.String(); got != tt.want {
				t.Errorf("Resolve(%q) = %q, want %q", tt.ref, got, tt.want)
			}
		})
	}
}

func TestResolveMore(t *testing.T) {
	tests := []struct {
		name, base, ref, want string
		err                   error
	}{
		{"empty base path", "http://a.com", "x", "http://a.com/x", nil},
		{"base with userinfo", "http://u:p@a.com/d/", "x", "http://u:p@a.com/d/x", nil},
		{"scheme relative keeps base scheme", "https://a.com/", "//b.com/x", "https://b.com/x", nil},
		{"mailto", "http://a.com/", "mailto:x@a.com", "", ErrScheme},
		{"javascript", "http://a.com/", "javascript:void(0)", "", ErrScheme},
		{"bad port", "http://a.com/", "//b.com:x/", "", ErrParse},
		{"empty authority", "http://a.com/", "///x", "", ErrNoHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := Resolve(mustParse(t, tt.base), tt.ref)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Resolve = %v, %v; want %v", u, err, tt.err)
				}
				return
			}
			if err != nil || u.String() != tt.want {
				t.Fatalf("Resolve(%q, %q) = %v, %v; want %q", tt.base, tt.ref, u, err, tt.want)
			}
		})
	}
	if u, err := Resolve(nil, "http://A.com"); err != nil || u.String() != "http://a.com/" {
		t.Errorf("Resolve(nil, absolute) = %v, %v", u, err)
	}
	if _, err := Resolve(nil, "x"); !errors.Is(err, ErrParse) {
		t.Errorf("Resolve(nil, relative) err = %v, want ErrParse", err)
	}
	ftp := &url.URL{Scheme: "ftp", Host: "a.com", Path: "/"}
	if _, err := Resolve(ftp, "x"); !errors.Is(err, ErrScheme) {
		t.Errorf("Resolve(ftp base) err = %v, want ErrScheme", err)
	}
}

// TestOrigin: the scheme and the port (default or not) are part of an origin, so http and
// https of one host have two.
func TestOrigin(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://A.com/", "http://a.com:80"},
		{"https://a.com/x", "https://a.com:443"},
		{"https://a.com:443/", "https://a.com:443"},
		{"http://a.com:443/", "http://a.com:443"},
		{"https://a.com:8443/", "https://a.com:8443"},
		{"http://[::1]/", "http://[::1]:80"},
	}
	for _, tt := range tests {
		if got := Origin(mustParse(t, tt.in)); got != tt.want {
			t.Errorf("Origin(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestHostKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://A.com/", "a.com"},
		{"https://a.com:443/", "a.com"},
		{"http://a.com:8080/", "a.com:8080"},
		{"https://a.com:80/", "a.com:80"},
		{"http://[::1]:8080/", "[::1]:8080"},
		{"https://[::1]/", "[::1]"},
	}
	for _, tt := range tests {
		if got := HostKey(mustParse(t, tt.in)); got != tt.want {
			t.Errorf("HostKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// Not produced by Parse: still lowercased, default port still dropped.
	raw := &url.URL{Scheme: "HTTPS", Host: "A.COM:443"}
	if got := HostKey(raw); got != "a.com" {
		t.Errorf("HostKey(raw) = %q, want a.com", got)
	}
	if HostKey(mustParse(t, "http://a.com/")) != HostKey(mustParse(t, "https://a.com/")) {
		t.Error("http and https of one host must share a key")
	}
}

func TestRegistrable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"www.example.com", "example.com"},
		{"a.b.example.co.uk", "example.co.uk"},
		{"Example.COM", "example.com"},
		{"www.example.com:8080", "example.com"},
		{"example.com.", "example.com"},
		{"co.uk", "co.uk"},
		{"com", "com"},
		{"localhost", "localhost"},
		{"localhost:8080", "localhost"},
		{"intranet", "intranet"},
		{"127.0.0.1", "127.0.0.1"},
		{"127.0.0.1:80", "127.0.0.1"},
		{"[::1]:80", "::1"},
		{"::1", "::1"},
		{"foo.github.io", "foo.github.io"}, // private section of the list
		{"xn--bcher-kva.example", "xn--bcher-kva.example"},
	}
	for _, tt := range tests {
		if got := Registrable(tt.in); got != tt.want {
			t.Errorf("Registrable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func mustParse(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return u
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		"http://a.com/", "HTTP://A.COM:80/a/../b?c#d", "https://[::1]:443/%7e", "http://Bücher.example/ü",
		`http:\\a\b`, "http://u:p@h/?q=%zz", "javascript:x", "//a/b", "../x", "http://a/" + strings.Repeat("%41", 700),
	} {
		f.Add(s, "g/../h?x")
	}
	base, _ := Parse("http://base.example/dir/page?q")
	f.Fuzz(func(t *testing.T, raw, rel string) {
		check := func(u *url.URL, err error, what string) {
			if err != nil {
				return
			}
			s := u.String()
			if len(s) > MaxLength {
				t.Fatalf("%s: %d bytes > MaxLength", what, len(s))
			}
			v, err := Parse(s)
			if err != nil {
				t.Fatalf("%s: normalized %q does not parse: %v", what, s, err)
			}
			if v.String() != s {
				t.Fatalf("%s: not idempotent: %q -> %q", what, s, v.String())
			}
			if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
				t.Fatalf("%s: %q: bad scheme or host", what, s)
			}
			if HostKey(u) != u.Host {
				t.Fatalf("%s: HostKey %q != Host %q", what, HostKey(u), u.Host)
			}
			_ = Registrable(u.Host)
		}
		u, err := Parse(raw)
		check(u, err, "Parse")
		r, err := Resolve(base, rel)
		check(r, err, "Resolve(base)")
		if u != nil {
			r, err = Resolve(u, rel)
			check(r, err, "Resolve(parsed)")
		}
	})
}

func BenchmarkResolve(b *testing.B) {
	base, _ := Parse("http://example.com/dir/page.html?x=1")
	b.ReportAllocs()
	for b.Loop() {
		Resolve(base, "../other/path/to/thing?q=a%7eb")
	}
}

func TestRedactPassword(t *testing.T) {
	for _, tc := range []struct{ in, shown, pass string }{
		{"http://bob:pw@host/", "http://bob:…@host/", "pw"},
		{"redis://:hunter2@127.0.0.1:6379/0", "redis://:…@127.0.0.1:6379/0", "hunter2"},
		{"http://bob:p@ss@exa mple.com/x@y", "http://bob:…@exa mple.com/x@y", "p@ss"},
		{"http://bob@host/", "http://bob@host/", ""},
		{"http://host/a:b@c", "http://host/a:b@c", ""},
		{"not a url", "not a url", ""},
	} {
		shown, pass := RedactPassword(tc.in)
		if shown != tc.shown || pass != tc.pass {
			t.Errorf("RedactPassword(%q) = %q, %q; want %q, %q", tc.in, shown, pass, tc.shown, tc.pass)
		}
	}
}
