package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
)

// ErrorKind is the coarse class of a failed fetch.
type ErrorKind int

const (
	// Other is anything not below: an invalid request, an error returned by
	// Config.DialControl (test it with errors.Is on the *Error), ...
	Other ErrorKind = iota
	// Timeout: Config.Timeout, Config.HeaderTimeout, Config.ConnectTimeout or
	// the caller's context deadline expired, or an I/O deadline hit.
	Timeout
	// ConnRefused: the dial was refused (ECONNREFUSED).
	ConnRefused
	// ConnReset: the connection was reset or closed before the message was
	// complete (ECONNRESET, EPIPE, ECONNABORTED, unexpected EOF).
	ConnReset
	// DNS: the host name could not be resolved.
	DNS
	// TLS: handshake or certificate verification failed.
	TLS
	// Protocol: the peer answered, but not with valid HTTP (malformed status
	// line or headers, headers over Config.MaxHeaderBytes, bad chunking), or
	// its Content-Encoding did not decode.
	Protocol
	// Canceled: the caller's context was canceled.
	Canceled
)

var kindNames = [...]string{
	Other:       "other",
	Timeout:     "timeout",
	ConnRefused: "conn-refused",
	ConnReset:   "conn-reset",
	DNS:         "dns",
	TLS:         "tls",
	Protocol:    "protocol",
	Canceled:    "canceled",
}

// String returns the kind's name: "timeout", "conn-refused", "conn-reset",
// "dns", "tls", "protocol", "canceled" or "other".
func (k ErrorKind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "other"
	}
	return kindNames[k]
}

// Error is the error type returned by Client.Get.
type Error struct {
	Kind ErrorKind
	URL  string // the URL requested
	Err  error  // the underlying error
}

func (e *Error) Error() string {
	return "fetch " + e.URL + ": " + e.Kind.String() + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Causes set on the request context by Get's own timers, so a timeout is
// told apart from a cancellation by the caller.
var (
	// errTimeout is the cause when Config.Timeout expires.
	errTimeout = errors.New("request timeout exceeded")
	// errHeaderTimeout is the cause when Config.HeaderTimeout expires
	// before the response headers arrived.
	errHeaderTimeout = errors.New("timeout awaiting response headers")
	// errDecode wraps a failure of the Content-Encoding decoder.
	errDecode = errors.New("content decoding failed")
)

// classify maps an error from the transport or the body reader to a Kind.
// gotConn says whether a connection had been established: a failure after
// that which is not a network error is the peer not speaking valid HTTP.
func classify(err error, gotConn bool) ErrorKind {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, errTimeout), errors.Is(err, errHeaderTimeout),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return Timeout
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.As(err, &dnsErr):
		return DNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return ConnRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF):
		return ConnReset
	case isTLS(err):
		return TLS
	case errors.As(err, &netErr) && netErr.Timeout():
		return Timeout
	case errors.Is(err, errDecode):
		return Protocol
	case gotConn:
		var opErr *net.OpError
		if errors.As(err, &opErr) {
			return Other
		}
		return Protocol
	}
	return Other
}

// isTLS reports whether err comes from the TLS handshake or certificate
// checks, or is net/http's report that an https URL got a plain-HTTP
// answer. crypto/tls returns many handshake failures as plain errors whose
// text starts with "tls: ", hence the fallback on the message.
func isTLS(err error) bool {
	var (
		recErr   tls.RecordHeaderError
		alertErr tls.AlertError
		verErr   *tls.CertificateVerificationError
		echErr   *tls.ECHRejectionError
		uaErr    x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		invErr   x509.CertificateInvalidError
	)
	if errors.Is(err, http.ErrSchemeMismatch) {
		return true // an https URL on a port that speaks plain HTTP
	}
	if errors.As(err, &recErr) || errors.As(err, &alertErr) || errors.As(err, &verErr) ||
		errors.As(err, &echErr) || errors.As(err, &uaErr) || errors.As(err, &hostErr) ||
		errors.As(err, &invErr) {
		return true
	}
	return strings.Contains(err.Error(), "tls: ")
}
