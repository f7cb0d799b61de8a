package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestClassify(t *testing.T) {
	urlErr := func(err error) error { return &url.Error{Op: "Get", URL: "http://a/", Err: err} }
	opErr := func(op string, err error) error {
		return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError("syscall", err)}
	}
	tests := []struct {
		name    string
		err     error
		gotConn bool
		want    ErrorKind
	}{
		{"own timeout", errTimeout, true, Timeout},
		{"own header timeout", fmt.Errorf("x: %w", errHeaderTimeout), true, Timeout},
		{"context deadline", urlErr(context.DeadlineExceeded), false, Timeout},
		{"io deadline", urlErr(&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}), true, Timeout},
		{"dial timeout", urlErr(&net.OpError{Op: "dial", Err: timeoutErr{}}), false, Timeout},
		{"canceled", urlErr(context.Canceled), true, Canceled},
		{"dns", urlErr(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}}), false, DNS},
		{"dns timeout is dns", urlErr(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "i/o timeout", Name: "x", IsTimeout: true}}), false, DNS},
		{"refused", urlErr(opErr("dial", syscall.ECONNREFUSED)), false, ConnRefused},
		{"reset", urlErr(opErr("read", syscall.ECONNRESET)), true, ConnReset},
		{"broken pipe", urlErr(opErr("write", syscall.EPIPE)), true, ConnReset},
		{"unexpected eof", io.ErrUnexpectedEOF, true, ConnReset},
		{"eof before response", urlErr(io.EOF), true, ConnReset},
		{"unknown authority", urlErr(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), false, TLS},
		{"hostname", urlErr(x509.HostnameError{Host: "a"}), false, TLS},
		{"alert", urlErr(&net.OpError{Op: "remote error", Err: tls.AlertError(40)}), false, TLS},
		{"record header", urlErr(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), false, TLS},
		{"tls text", urlErr(errors.New("tls: handshake failure")), false, TLS},
		{"plain HTTP on https", urlErr(http.ErrSchemeMismatch), true, TLS},
		{"decode", fmt.Errorf("%w: gzip: bad header", errDecode), true, Protocol},
		{"malformed after connect", urlErr(errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP response "x"`)), true, Protocol},
		{"net error after connect", urlErr(&net.OpError{Op: "read", Err: errors.New("weird")}), true, Other},
		{"dial control", urlErr(&net.OpError{Op: "dial", Err: errors.New("guard says no")}), false, Other},
		{"bad request", errors.New("unsupported protocol scheme"), false, Other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.err, tt.gotConn); got != tt.want {
				t.Errorf("classify(%v, %v) = %v, want %v", tt.err, tt.gotConn, got, tt.want)
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestErrorKindString(t *testing.T) {
	want := map[ErrorKind]string{
		Other: "other", Timeout: "timeout", ConnRefused: "conn-refused", ConnReset: "conn-reset",
		DNS: "dns", TLS: "tls", Protocol: "protocol", Canceled: "canceled", ErrorKind(99): "other", ErrorKind(-1): "other",
	}
	for k, s := range want {
		if k.String() != s {
			t.Errorf("%d.String() = %q, want %q", int(k), k.String(), s)
		}
	}
	e := &Error{Kind: Timeout, URL: "http://a/", Err: errTimeout}
	if e.Error() != "fetch http://a/: timeout: request timeout exceeded" || !errors.Is(e, errTimeout) {
		t.Errorf("Error() = %q", e.Error())
	}
}

// TestMaxBodyNoOverflow: a MaxBody of math.MaxInt64 keeps the whole body (reading max+1 bytes
// to detect a cut must not overflow into a limit of nothing).
func TestMaxBodyNoOverflow(t *testing.T) {
	b, truncated, _, err := decodeBody(strings.NewReader("hello"), nil, math.MaxInt64, -1)
	if err != nil || truncated || string(b) != "hello" {
		t.Errorf("decodeBody = %q, %v, %v; want hello, false, nil", b, truncated, err)
	}
}
