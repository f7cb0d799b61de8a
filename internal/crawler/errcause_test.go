package crawler

import (
	"crypto/tls"
	"net/url"
	"testing"

	"github.com/crawl-project/crawl/fetch"
)

// TestErrCauseNamesKindOnce: a cause whose own text starts with its kind (crypto/tls errors
// start "tls: ") names the kind once, not "tls: tls: first record …".
func TestErrCauseNamesKindOnce(t *testing.T) {
	tlsErr := tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&fetch.Error{Kind: fetch.TLS, URL: "https://h/", Err: &url.Error{Op: "Get", URL: "https://h/", Err: tlsErr}},
			"tls: first record does not look like a TLS handshake"},
		{&fetch.Error{Kind: fetch.TLS, URL: "https://h/", Err: &url.Error{Op: "Get", URL: "https://h/", Err: errString("http: server gave HTTP response to HTTPS client")}},
			"tls: http: server gave HTTP response to HTTPS client"},
	} {
		if got := errCause(tt.err); got != tt.want {
			t.Errorf("errCause(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }
