package urlnorm

import (
	"errors"
	"net/url"
	"testing"
)

// TestNoHostNeverResolves: a reference that names no http(s) host — another scheme, or an
// http(s) URL without authority or with an empty one — is refused by Resolve, so a link like
// it never reaches the frontier as a URL with the host key "".
func TestNoHostNeverResolves(t *testing.T) {
	base, err := Parse("http://a.example/d/p")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, ref string
		want      error
	}{
		{"mailto", "mailto:me@a.example", ErrScheme},
		{"mailto upper case", "MAILTO:me@a.example", ErrScheme},
		{"mailto with query", " mailto:me@a.example?subject=hi", ErrScheme},
		{"tel", "tel:+15551234", ErrScheme},
		{"sms", "sms:+15551234", ErrScheme},
		{"javascript", "javascript:void(0)", ErrScheme},
		{"javascript with a tab", "java\tscript:void(0)", ErrScheme},
		{"data", "data:,x", ErrScheme},
		{"about", "about:blank", ErrScheme},
		{"urn", "urn:isbn:0451450523", ErrScheme},
		{"file", "file:///etc/passwd", ErrScheme},
		{"http without authority", "http:/path", ErrNoHost},
		{"http opaque", "http:path", ErrNoHost},
		{"empty authority", "http:///x", ErrNoHost},
		{"scheme-relative empty", "//", ErrNoHost},
		{"userinfo only", "http://@/", ErrNoHost},
		{"port only", "https://:8443/", ErrNoHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := Resolve(base, tt.ref)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Resolve(%q) = %v (host key %q), %v; want %v", tt.ref, u, hostKeyOf(u), err, tt.want)
			}
		})
	}
}

func hostKeyOf(u *url.URL) string {
	if u == nil {
		return ""
	}
	return HostKey(u)
}
