package fetch

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/crawl-project/crawl/internal/urlnorm"
)

// Defaults for zero Config fields.
const (
	DefaultUserAgent      = "crawl/0.1"
	DefaultTimeout        = 30 * time.Second
	DefaultConnectTimeout = 10 * time.Second
	DefaultMaxBody        = 10 << 20
	DefaultMaxHeaderBytes = 1 << 20
)

// acceptEncoding is what Get advertises; decodeBody handles each of them.
const acceptEncoding = "gzip, deflate, br"

const accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

// Config configures a Client. Zero fields take the documented defaults.
type Config struct {
	// UserAgent is sent on every request (default DefaultUserAgent).
	UserAgent string
	// Timeout bounds the whole request, body read included (default 30s).
	Timeout time.Duration
	// ConnectTimeout bounds the TCP connect and, separately, the TLS
	// handshake (default 10s).
	ConnectTimeout time.Duration
	// HeaderTimeout bounds the wait from the start of the request until the
	// response headers have arrived (default Timeout). Enforced by Get
	// itself, so it holds with an injected Transport too.
	HeaderTimeout time.Duration
	// MaxBody is the most decoded body bytes kept (default 10 MiB). A longer
	// body is cut there, Truncated is set and the rest is not read.
	MaxBody int64
	// MaxHeaderBytes caps the response header size (default 1 MiB); a larger
	// header fails with Kind Protocol. Applies to the default transport.
	MaxHeaderBytes int64
	// DialControl, if set, is called with the address actually being
	// dialled, after DNS resolution and before connecting: the hook for an
	// SSRF guard. Its error fails the request with Kind Other and stays in
	// the error chain (errors.Is works). Applies to the default transport.
	DialControl func(network, address string, c syscall.RawConn) error
	// Resolver looks up host names for the default transport (nil: a Resolver on the
	// system resolver). Share one per crawl, so that its cache serves every lookup.
	Resolver *Resolver
	// Proxy chooses the proxy of a request, as http.Transport.Proxy does (nil:
	// none). Applies to the default transport.
	Proxy func(*http.Request) (*url.URL, error)
	// TLS configures TLS (roots, InsecureSkipVerify); nil: the system's
	// roots. Applies to the default transport.
	TLS *tls.Config
	// Header is added to every request; Get's own User-Agent, Accept and
	// Accept-Encoding take precedence.
	Header http.Header
	// HostHeader holds headers by host key (urlnorm.HostKey), added to the
	// requests to that host only, over Header's of the same name.
	HostHeader map[string]http.Header
	// BasicAuth holds credentials by origin (urlnorm.Origin: scheme, host
	// and port): a request to that origin, and only to it, carries them;
	// never to the same host over another scheme or port. They are left out
	// of Response.ReqHeader, so they are never stored.
	BasicAuth map[string]*url.Userinfo
	// Jar, if set, sends its cookies with each request and keeps the ones
	// responses set. Cookies are left out of Response.ReqHeader.
	Jar http.CookieJar
	// Transport replaces the tuned default transport; meant for tests. The
	// options marked "default transport" above do not apply to it. Get
	// always sets Accept-Encoding itself, so an injected transport should
	// not decompress.
	Transport http.RoundTripper
}

// Client fetches single HTTP hops. It is safe for concurrent use by
// multiple goroutines; create one per crawl and share it.
type Client struct {
	cfg Config
	hc  *http.Client
}

// New returns a Client for cfg, filling in defaults.
func New(cfg Config) *Client {
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = cfg.Timeout
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.Resolver == nil {
		cfg.Resolver = NewResolver(ResolverConfig{})
	}
	rt := cfg.Transport
	if rt == nil {
		rt = newTransport(cfg)
	}
	return &Client{
		cfg: cfg,
		hc: &http.Client{
			Transport: rt,
			Jar:       cfg.Jar,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
	}
}

// maxIdleConns bounds the keep-alive connections kept open across hosts (each holds about 30 KB:
// buffers and two goroutines); the least recently used go first. A broad crawl finishes hosts
// one after another, so connections to hosts it is done with should not pile up.
const maxIdleConns = 256

// newTransport builds the transport tuned for crawling: many hosts, few
// connections each (hostlimit decides concurrency), names looked up by
// cfg.Resolver, the proxy cfg.Proxy chooses (none from the environment unless
// it does), no transparent decompression.
func newTransport(cfg Config) *http.Transport {
	d := &net.Dialer{
		Timeout:   cfg.ConnectTimeout,
		KeepAlive: 30 * time.Second,
		Control:   cfg.DialControl,
	}
	return &http.Transport{
		Proxy:                  cfg.Proxy,
		TLSClientConfig:        cfg.TLS,
		DialContext:            cfg.Resolver.dialContext(d),
		TLSHandshakeTimeout:    cfg.ConnectTimeout,
		ResponseHeaderTimeout:  cfg.HeaderTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxIdleConns:           maxIdleConns,
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        30 * time.Second,
		MaxResponseHeaderBytes: cfg.MaxHeaderBytes,
		ForceAttemptHTTP2:      true,
		DisableCompression:     true,
	}
}

// CloseIdle closes idle keep-alive connections. It does not interrupt
// requests in flight.
func (c *Client) CloseIdle() { c.hc.CloseIdleConnections() }

// Get fetches u with one GET request, without following redirects.
//
// On success it returns the Response and a nil error, whatever the status
// code. On failure the error is an *Error. If the response headers had
// arrived before the failure (the body stalled past Timeout, the connection
// was reset mid-body, the Content-Encoding was corrupt), Get returns both:
// the Response holds what was read, with Truncated set, so the caller may
// record it; the *Error says why it is incomplete. A body cut at MaxBody is
// not a failure: Truncated is set and the error is nil.
func (c *Client) Get(ctx context.Context, u *url.URL) (*Response, error) {
	return c.GetWith(ctx, u, GetOptions{})
}

// Validators are what a stored answer offers to ask whether it changed since: its ETag and
// Last-Modified header values, "" when absent.
type Validators struct{ ETag, LastModified string }

// GetOptions shape one GET. The zero value is a plain Get.
type GetOptions struct {
	// If makes the request conditional: If-None-Match carries If.ETag and If-Modified-Since
	// If.LastModified, each only when set. A 304 Not Modified answer says the stored answer is
	// current. The conditions are part of Response.ReqHeader.
	If Validators
	// AcceptType, if not nil, refuses media types: a 2xx response whose Content-Type names a
	// type it refuses has its body left unread (the connection is closed after the headers), and
	// the Response has Body nil, ContentType that type and BodyState BodyRefused. A response
	// without a usable Content-Type is read (its type can only be sniffed from the body).
	AcceptType func(mediaType string) bool
	// Wrote, if not nil, is called with the time the request was written to the connection
	// (a per-host gate paces from it: see hostlimit.Ticket.Wrote).
	Wrote func(time.Time)
	// Method is the request's method ("": GET). Body is sent with it (at most MaxRequestBody
	// bytes; a longer one fails with Kind Other, nothing sent), typed BodyType when set. The
	// response is read, capped and decoded as a GET's.
	Method   string
	Body     []byte
	BodyType string
	// Header holds headers of the request's own (a rendered page's script set them), sent with
	// it except those the client sets or owns (OwnedHeader): a value Go refuses fails the
	// request with Kind Other, nothing sent. Accept from Header replaces the client's.
	// Authorization is sent but, as a credential, left out of Response.ReqHeader.
	Header http.Header
}

// OwnedHeader reports whether the client alone sets the header named k (canonical): the
// identity and encodings it speaks, the conditionals, its cookies, the connection's own, and
// Range (a body is read whole).
func OwnedHeader(k string) bool {
	switch k {
	case "User-Agent", "Accept-Encoding", "Content-Type", "Content-Length", "Host", "Cookie",
		"Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Te", "Trailer",
		"Transfer-Encoding", "Upgrade", "Range", "If-Range", "If-None-Match", "If-Modified-Since",
		"If-Match", "If-Unmodified-Since", "Expect":
		return true
	}
	return false
}

// MaxRequestBody is the most bytes a request body may hold.
const MaxRequestBody = 1 << 20

// errRequestBody: a request body over MaxRequestBody.
var errRequestBody = errors.New("request body over MaxRequestBody")

// GetWith is Get shaped by o.
func (c *Client) GetWith(ctx context.Context, u *url.URL, o GetOptions) (*Response, error) {
	v, acceptType := o.If, o.AcceptType
	rawURL := u.String()
	started := time.Now()

	ctx, cancelTimeout := context.WithTimeoutCause(ctx, c.cfg.Timeout, errTimeout)
	defer cancelTimeout()
	reqCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var (
		mu         sync.Mutex
		gotConn    bool
		remoteAddr string
		wrote      time.Time
	)
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			mu.Lock()
			defer mu.Unlock()
			gotConn = true
			if a := info.Conn.RemoteAddr(); a != nil {
				remoteAddr = a.String()
			}
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err != nil {
				return
			}
			at := time.Now()
			mu.Lock()
			wrote = at
			mu.Unlock()
			if o.Wrote != nil {
				o.Wrote(at)
			}
		},
	}
	connState := func() (bool, string, time.Time) {
		mu.Lock()
		defer mu.Unlock()
		return gotConn, remoteAddr, wrote
	}
	fail := func(err error) *Error {
		if ctxErr := reqCtx.Err(); ctxErr != nil {
			// The context ended: report why (which of our timers fired, or
			// the caller's cause) rather than the transport's wording of it.
			cause := context.Cause(reqCtx)
			kind := Canceled
			if errors.Is(ctxErr, context.DeadlineExceeded) || errors.Is(cause, errHeaderTimeout) {
				kind = Timeout
			}
			return &Error{Kind: kind, URL: rawURL, Err: cause}
		}
		got, _, _ := connState()
		return &Error{Kind: classify(err, got), URL: rawURL, Err: err}
	}

	method := o.Method
	if method == "" {
		method = http.MethodGet
	}
	if len(o.Body) > MaxRequestBody {
		return nil, &Error{Kind: Other, URL: rawURL, Err: errRequestBody}
	}
	var reqBody io.Reader
	if o.Body != nil {
		reqBody = bytes.NewReader(o.Body)
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(reqCtx, trace), method, rawURL, reqBody)
	if err != nil {
		return nil, &Error{Kind: Other, URL: rawURL, Err: err}
	}
	for k, vs := range c.cfg.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
	for k, vs := range c.cfg.HostHeader[urlnorm.HostKey(u)] {
		req.Header[k] = append([]string(nil), vs...)
	}
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	req.Header.Set("Accept", accept)
	var auth []string
	for k, vs := range o.Header {
		switch k = http.CanonicalHeaderKey(k); {
		case OwnedHeader(k) || len(vs) == 0:
		case k == "Authorization":
			auth = vs
		default:
			req.Header[k] = append([]string(nil), vs...)
		}
	}
	req.Header.Set("Accept-Encoding", acceptEncoding)
	if o.BodyType != "" {
		req.Header.Set("Content-Type", o.BodyType)
	}
	if v.ETag != "" {
		req.Header.Set("If-None-Match", v.ETag)
	}
	if v.LastModified != "" {
		req.Header.Set("If-Modified-Since", v.LastModified)
	}
	reqHeader := req.Header.Clone() // before the credentials: what is stored never holds them
	reqHeader.Set("Host", req.Host)
	if auth != nil {
		req.Header["Authorization"] = append([]string(nil), auth...)
	}
	if ui := c.cfg.BasicAuth[urlnorm.Origin(u)]; ui != nil {
		pass, _ := ui.Password()
		req.SetBasicAuth(ui.Username(), pass)
	}

	headerTimer := time.AfterFunc(c.cfg.HeaderTimeout, func() { cancel(errHeaderTimeout) })
	resp, err := c.hc.Do(req)
	headerTimer.Stop()
	if err != nil {
		return nil, fail(err)
	}
	defer resp.Body.Close()
	headerLatency := time.Since(started)

	r := &Response{
		URL:           u,
		Status:        resp.StatusCode,
		StatusLine:    resp.Proto + " " + resp.Status,
		Proto:         resp.Proto,
		Header:        resp.Header,
		ReqHeader:     reqHeader,
		Started:       started,
		HeaderLatency: headerLatency,
	}
	_, r.RemoteAddr, r.Wrote = connState()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		if loc := resp.Header.Get("Location"); loc != "" {
			r.Location, r.LocationErr = urlnorm.Resolve(u, loc)
		}
	}

	if acceptType != nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if mt := contentType(resp.Header.Get("Content-Type"), nil); mt != "" && !acceptType(mt) {
			r.ContentType, r.BodyState, r.Duration = mt, BodyRefused, time.Since(started)
			return r, nil
		}
	}

	body, truncated, decodedFrom, err := decodeBody(resp.Body, resp.Header.Values("Content-Encoding"), c.cfg.MaxBody, resp.ContentLength)
	r.Body, r.Truncated, r.DecodedFrom = body, truncated, decodedFrom
	r.ContentType = contentType(resp.Header.Get("Content-Type"), body)
	r.Duration = time.Since(started)
	if err != nil {
		r.Truncated = true
		return r, fail(err)
	}
	return r, nil
}

// contentType returns the lowercased media type of the Content-Type header
// without parameters, or, if the header is missing or unusable, the type
// sniffed from body ("" for an empty body).
func contentType(header string, body []byte) string {
	if header != "" {
		if mt, _, err := mime.ParseMediaType(header); err == nil && strings.Contains(mt, "/") {
			return mt
		}
		mt, _, _ := strings.Cut(header, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
		if t, s, ok := strings.Cut(mt, "/"); ok && t != "" && s != "" && !strings.ContainsAny(mt, " \t,") {
			return mt
		}
	}
	if len(body) == 0 {
		return ""
	}
	mt, _, _ := strings.Cut(http.DetectContentType(body), ";")
	return mt
}
