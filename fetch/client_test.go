package fetch

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"go.uber.org/goleak"

	"github.com/crawl-project/crawl/internal/refused"
	"github.com/crawl-project/crawl/internal/urlnorm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newClient returns a Client that closes its idle connections at cleanup.
func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c := New(cfg)
	t.Cleanup(c.CloseIdle)
	return c
}

// serve starts a loopback HTTP server for the test.
func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := urlnorm.Parse(s)
	if err != nil {
		t.Fatalf("urlnorm.Parse(%q): %v", s, err)
	}
	return u
}

// wantKind fails unless err is an *Error of kind k.
func wantKind(t *testing.T, err error, k ErrorKind) *Error {
	t.Helper()
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *fetch.Error", err, err)
	}
	if fe.Kind != k {
		t.Fatalf("kind = %v, want %v (error: %v)", fe.Kind, k, err)
	}
	return fe
}

func TestGet(t *testing.T) {
	var gotUA, gotAE string
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		gotUA, gotAE = r.UserAgent(), r.Header.Get("Accept-Encoding")
		w.Header().Set("Content-Type", "Text/HTML; charset=ISO-8859-1")
		w.Header().Set("X-Test", "yes")
		fmt.Fprint(w, "<p>hello</p>")
	})
	c := newClient(t, Config{UserAgent: "testbot/1.0"})
	u := mustURL(t, s.URL+"/page")
	before := time.Now()
	r, err := c.Get(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	if gotUA != "testbot/1.0" || gotAE != "gzip, deflate, br" {
		t.Errorf("server saw User-Agent %q, Accept-Encoding %q", gotUA, gotAE)
	}
	if r.Status != 200 || r.StatusLine != "HTTP/1.1 200 OK" || r.Proto != "HTTP/1.1" {
		t.Errorf("status = %d %q %q", r.Status, r.StatusLine, r.Proto)
	}
	if string(r.Body) != "<p>hello</p>" || r.Truncated || r.DecodedFrom != "" {
		t.Errorf("body = %q truncated=%v decoded=%q", r.Body, r.Truncated, r.DecodedFrom)
	}
	if r.ContentType != "text/html" {
		t.Errorf("ContentType = %q", r.ContentType)
	}
	if r.Header.Get("X-Test") != "yes" {
		t.Errorf("header = %v", r.Header)
	}
	if r.ReqHeader.Get("User-Agent") != "testbot/1.0" || r.ReqHeader.Get("Accept-Encoding") != acceptEncoding ||
		r.ReqHeader.Get("Host") != u.Host {
		t.Errorf("ReqHeader = %v", r.ReqHeader)
	}
	if r.RemoteAddr != s.Listener.Addr().String() {
		t.Errorf("RemoteAddr = %q, want %q", r.RemoteAddr, s.Listener.Addr())
	}
	if r.URL != u || r.Location != nil || r.LocationErr != nil {
		t.Errorf("URL %v Location %v %v", r.URL, r.Location, r.LocationErr)
	}
	if r.Started.Before(before) || r.HeaderLatency <= 0 || r.Duration < r.HeaderLatency {
		t.Errorf("timing: started %v header %v total %v", r.Started, r.HeaderLatency, r.Duration)
	}
	if r.Wrote.Before(r.Started) || r.Wrote.After(r.Started.Add(r.HeaderLatency)) {
		t.Errorf("timing: wrote %v, want between started %v and the headers %v later", r.Wrote, r.Started, r.HeaderLatency)
	}
}

// TestGetIfChanged: GetOptions.If: the validators given are sent as conditions (only those set), recorded in
// ReqHeader, and a 304 comes back as a Response; Get sends none.
func TestGetIfChanged(t *testing.T) {
	var inm, ims []string
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		inm, ims = r.Header.Values("If-None-Match"), r.Header.Values("If-Modified-Since")
		if len(inm) > 0 || len(ims) > 0 {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		fmt.Fprint(w, "<p>hello</p>")
	})
	c := newClient(t, Config{})
	u := mustURL(t, s.URL+"/page")
	const lm = "Wed, 01 Jan 2020 00:00:00 GMT"
	for _, tc := range []struct {
		name     string
		v        Validators
		wantINM  string
		wantIMS  string
		wantCode int
	}{
		{"both", Validators{ETag: `"v1"`, LastModified: lm}, `"v1"`, lm, 304},
		{"etag", Validators{ETag: `W/"v1"`}, `W/"v1"`, "", 304},
		{"last-modified", Validators{LastModified: lm}, "", lm, 304},
		{"none", Validators{}, "", "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.GetWith(context.Background(), u, GetOptions{If: tc.v})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(inm, ",") != tc.wantINM || strings.Join(ims, ",") != tc.wantIMS {
				t.Errorf("server saw If-None-Match %q If-Modified-Since %q", inm, ims)
			}
			if r.Status != tc.wantCode || r.ReqHeader.Get("If-None-Match") != tc.wantINM || r.ReqHeader.Get("If-Modified-Since") != tc.wantIMS {
				t.Errorf("status %d, ReqHeader %v", r.Status, r.ReqHeader)
			}
		})
	}
	if _, err := c.Get(context.Background(), u); err != nil || len(inm)+len(ims) != 0 {
		t.Errorf("Get sent conditions %q %q (%v)", inm, ims, err)
	}
}

func TestDefaultUserAgent(t *testing.T) {
	var got string
	s := serve(t, func(w http.ResponseWriter, r *http.Request) { got = r.UserAgent() })
	if _, err := newClient(t, Config{}).Get(context.Background(), mustURL(t, s.URL)); err != nil {
		t.Fatal(err)
	}
	if got != DefaultUserAgent {
		t.Errorf("User-Agent = %q, want %q", got, DefaultUserAgent)
	}
}

func gzipBytes(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func zlibBytes(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func flateBytes(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.DefaultCompression)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func brBytes(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := brotli.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func TestDecoding(t *testing.T) {
	plain := []byte(strings.Repeat("<p>compressible text</p>\n", 200))
	tests := []struct {
		name        string
		encoding    string
		body        []byte
		want        []byte
		decodedFrom string
		kind        ErrorKind // Other = no error expected
	}{
		{"identity", "", plain, plain, "", Other},
		{"identity explicit", "identity", plain, plain, "", Other},
		{"gzip", "gzip", gzipBytes(t, plain), plain, "gzip", Other},
		{"x-gzip upper", "X-GZIP", gzipBytes(t, plain), plain, "x-gzip", Other},
		{"deflate zlib", "deflate", zlibBytes(t, plain), plain, "deflate", Other},
		{"deflate raw", "deflate", flateBytes(t, plain), plain, "deflate", Other},
		{"br", "br", brBytes(t, plain), plain, "br", Other},
		{"stacked", "br, gzip", gzipBytes(t, brBytes(t, plain)), plain, "br, gzip", Other},
		{"unknown kept raw", "compress", []byte("\x1f\x9dLZW"), []byte("\x1f\x9dLZW"), "", Other},
		{"unknown in stack kept raw", "gzip, zstd", []byte("zstd-bytes"), []byte("zstd-bytes"), "", Other},
		{"empty gzip body", "gzip", nil, nil, "", Other},
		{"corrupt gzip", "gzip", []byte("this is not gzip at all"), nil, "", Protocol},
		{"truncated gzip", "gzip", gzipBytes(t, plain)[:40], nil, "gzip", Protocol},
		{"corrupt br", "br", []byte("\xff\xff\xff\xff not brotli"), nil, "br", Protocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := serve(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.encoding != "" {
					w.Header().Set("Content-Encoding", tt.encoding)
				}
				w.Header().Set("Content-Type", "text/html")
				w.Write(tt.body)
			})
			r, err := newClient(t, Config{}).Get(context.Background(), mustURL(t, s.URL))
			if tt.kind != Other {
				wantKind(t, err, tt.kind)
				if r == nil || !r.Truncated || r.Status != 200 {
					t.Fatalf("want partial response with Truncated, got %+v", r)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(r.Body, tt.want) || r.DecodedFrom != tt.decodedFrom || r.Truncated {
				t.Fatalf("body %d bytes (want %d), DecodedFrom %q (want %q), Truncated %v",
					len(r.Body), len(tt.want), r.DecodedFrom, tt.decodedFrom, r.Truncated)
			}
			// Headers stay as received, decoded or not: export needs what the server sent.
			if ce := r.Header.Get("Content-Encoding"); ce != tt.encoding {
				t.Errorf("Content-Encoding = %q, want it kept as received: %q", ce, tt.encoding)
			}
		})
	}
}

func TestMaxBody(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 100_000)
	tests := []struct {
		name     string
		encoding string
		wire     []byte
	}{
		{"raw", "", body},
		{"gzip", "gzip", gzipBytes(t, body)},
		{"br", "br", brBytes(t, body)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := serve(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.encoding != "" {
					w.Header().Set("Content-Encoding", tt.encoding)
				}
				w.Write(tt.wire)
			})
			c := newClient(t, Config{MaxBody: 10_000})
			r, err := c.Get(context.Background(), mustURL(t, s.URL))
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Body) != 10_000 || !r.Truncated {
				t.Fatalf("len %d truncated %v, want 10000 true", len(r.Body), r.Truncated)
			}
			// Exactly MaxBody bytes is not truncated.
			c = newClient(t, Config{MaxBody: int64(len(body))})
			if r, err = c.Get(context.Background(), mustURL(t, s.URL)); err != nil || r.Truncated || len(r.Body) != len(body) {
				t.Fatalf("MaxBody == size: len %d truncated %v err %v", len(r.Body), r.Truncated, err)
			}
		})
	}
}

// TestGzipBomb serves 1 GiB of zeros gzip-compressed (about 1 MB on the
// wire, as 1024 concatenated gzip members of 1 MiB each, which a gzip reader
// decodes as one stream) and checks that a MaxBody of 1 MiB bounds memory.
func TestGzipBomb(t *testing.T) {
	member := gzipBytes(t, make([]byte, 1<<20))
	const members = 1024
	var served atomic.Int64
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "application/octet-stream")
		for range members {
			if _, err := w.Write(member); err != nil {
				return
			}
			served.Add(1)
		}
	})
	c := newClient(t, Config{MaxBody: 1 << 20})
	u := mustURL(t, s.URL)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r, err := c.Get(context.Background(), u)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("wire %d bytes/member, members written %d/%d, allocated %.1f MiB", len(member), served.Load(), members, float64(alloc)/(1<<20))
	if !r.Truncated || len(r.Body) != 1<<20 || r.DecodedFrom != "gzip" {
		t.Fatalf("truncated %v len %d decoded %q", r.Truncated, len(r.Body), r.DecodedFrom)
	}
	if alloc > 20<<20 {
		t.Errorf("allocated %d bytes for a 1 MiB cap", alloc)
	}
}

func TestEndlessBodyCappedAtMaxBody(t *testing.T) {
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("a"), 4096)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	r, err := newClient(t, Config{MaxBody: 64 << 10}).Get(context.Background(), mustURL(t, s.URL))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || len(r.Body) != 64<<10 {
		t.Fatalf("truncated %v len %d", r.Truncated, len(r.Body))
	}
}

// A body that starts and then stalls runs into Timeout: Get returns the
// partial response and a Timeout error.
func TestStalledBodyTimeout(t *testing.T) {
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("first part"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	c := newClient(t, Config{Timeout: 300 * time.Millisecond})
	start := time.Now()
	r, err := c.Get(context.Background(), mustURL(t, s.URL))
	fe := wantKind(t, err, Timeout)
	if !errors.Is(fe, errTimeout) {
		t.Errorf("error %v does not wrap errTimeout", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %v", el)
	}
	if r == nil || string(r.Body) != "first part" || !r.Truncated || r.Status != 200 {
		t.Fatalf("partial response = %+v", r)
	}
}

func TestHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	for _, tc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"default transport", nil},
		{"injected transport", &http.Transport{DisableCompression: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, Config{Timeout: 20 * time.Second, HeaderTimeout: 150 * time.Millisecond, Transport: tc.rt})
			start := time.Now()
			r, err := c.Get(context.Background(), mustURL(t, s.URL))
			wantKind(t, err, Timeout)
			if r != nil {
				t.Errorf("response %+v without headers", r)
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("took %v", el)
			}
			if tr, ok := tc.rt.(*http.Transport); ok {
				tr.CloseIdleConnections()
			}
		})
	}
}

// resetConn hijacks the connection and closes it with SO_LINGER 0, so the
// kernel sends RST instead of FIN.
func resetConn(t *testing.T, w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Error(err)
		return
	}
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
}

func TestConnReset(t *testing.T) {
	s := serve(t, func(w http.ResponseWriter, r *http.Request) { resetConn(t, w) })
	r, err := newClient(t, Config{}).Get(context.Background(), mustURL(t, s.URL))
	fe := wantKind(t, err, ConnReset)
	if !errors.Is(fe, syscall.ECONNRESET) {
		t.Errorf("error %v is not ECONNRESET", err)
	}
	if r != nil {
		t.Errorf("response %+v", r)
	}
}

// A server that closes the connection mid-body (fewer bytes than its
// Content-Length) gives a partial response and ConnReset.
func TestCloseMidBody(t *testing.T) {
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		conn, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		bw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nonly this")
		bw.Flush()
	})
	r, err := newClient(t, Config{}).Get(context.Background(), mustURL(t, s.URL))
	wantKind(t, err, ConnReset)
	if r == nil || string(r.Body) != "only this" || !r.Truncated {
		t.Fatalf("partial response = %+v", r)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	var targetHits atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/a/b", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "../x?y=%7e#frag")
		w.WriteHeader(http.StatusFound)
	})
	mux.HandleFunc("/x", func(w http.ResponseWriter, r *http.Request) { targetHits.Add(1) })
	mux.HandleFunc("/js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "javascript:alert(1)")
		w.WriteHeader(http.StatusMovedPermanently)
	})
	mux.HandleFunc("/none", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusSeeOther) })
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Location", "/x") })
	s := serve(t, mux.ServeHTTP)
	c := newClient(t, Config{})
	get := func(path string) *Response {
		t.Helper()
		r, err := c.Get(context.Background(), mustURL(t, s.URL+path))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	r := get("/a/b")
	if r.Status != 302 || r.Location == nil || r.Location.String() != s.URL+"/x?y=~" || r.LocationErr != nil {
		t.Errorf("302: status %d Location %v err %v", r.Status, r.Location, r.LocationErr)
	}
	if n := targetHits.Load(); n != 0 {
		t.Errorf("redirect target fetched %d times", n)
	}
	r = get("/js")
	if r.Status != 301 || r.Location != nil || !errors.Is(r.LocationErr, urlnorm.ErrScheme) {
		t.Errorf("301 javascript: Location %v err %v", r.Location, r.LocationErr)
	}
	if r = get("/none"); r.Status != 303 || r.Location != nil || r.LocationErr != nil {
		t.Errorf("303 without Location: %v %v", r.Location, r.LocationErr)
	}
	if r = get("/ok"); r.Status != 200 || r.Location != nil {
		t.Errorf("200 with Location header: Location %v", r.Location)
	}
}

// rawServer accepts one connection at a time on loopback and answers each
// request with reply, then closes the connection.
func rawServer(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(conn)
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			io.WriteString(conn, reply)
			conn.Close()
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return "http://" + ln.Addr().String() + "/"
}

func TestErrorKinds(t *testing.T) {
	refusedURL := "http://" + refused.Addr(t) + "/"

	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake failure is the point
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)

	release := make(chan struct{})
	slow := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	bigHeader := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("b", 8<<10))
	})

	errGuard := errors.New("guard: private address")
	errShutdown := errors.New("crawler shutting down")
	guard := func(network, address string, _ syscall.RawConn) error {
		return fmt.Errorf("%w %s", errGuard, address)
	}

	tests := []struct {
		name   string
		cfg    Config
		url    string
		ctx    func() (context.Context, context.CancelFunc)
		kind   ErrorKind
		wraps  error
		within time.Duration
	}{
		{name: "refused", url: refusedURL, kind: ConnRefused, wraps: syscall.ECONNREFUSED},
		{name: "tls unknown authority", url: tlsSrv.URL, kind: TLS},
		{name: "garbage status line", url: rawServer(t, "garbage\r\n\r\n"), kind: Protocol},
		{name: "bad status code", url: rawServer(t, "HTTP/1.1 abc OK\r\n\r\n"), kind: Protocol},
		{name: "header too big", cfg: Config{MaxHeaderBytes: 1 << 10}, url: bigHeader.URL, kind: Protocol},
		{name: "dial control", cfg: Config{DialControl: guard}, url: slow.URL, kind: Other, wraps: errGuard},
		{name: "caller cancels", url: slow.URL, kind: Canceled, wraps: context.Canceled,
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(100*time.Millisecond, cancel)
				return ctx, cancel
			}},
		{name: "caller cancels with cause", url: slow.URL, kind: Canceled, wraps: errShutdown,
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancelCause(context.Background())
				time.AfterFunc(100*time.Millisecond, func() { cancel(errShutdown) })
				return ctx, func() { cancel(nil) }
			}},
		{name: "caller deadline", url: slow.URL, kind: Timeout, wraps: context.DeadlineExceeded,
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 100*time.Millisecond)
			}},
		{name: "already canceled", url: slow.URL, kind: Canceled,
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tt.ctx != nil {
				ctx, cancel = tt.ctx()
			}
			defer cancel()
			r, err := newClient(t, tt.cfg).Get(ctx, mustURL(t, tt.url))
			fe := wantKind(t, err, tt.kind)
			if tt.wraps != nil && !errors.Is(fe, tt.wraps) {
				t.Errorf("error %v does not wrap %v", err, tt.wraps)
			}
			if r != nil {
				t.Errorf("response %+v", r)
			}
			if !strings.Contains(fe.Error(), tt.kind.String()) || fe.URL == "" {
				t.Errorf("message %q", fe.Error())
			}
		})
	}
}

func TestConcurrentGets(t *testing.T) {
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(gzipBytes(t, []byte(r.URL.Path)))
	})
	c := newClient(t, Config{})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 5 {
				p := fmt.Sprintf("/p%d-%d", i, j)
				r, err := c.Get(context.Background(), mustURL(t, s.URL+p))
				if err != nil || string(r.Body) != p {
					t.Errorf("Get %s: %v %q", p, err, r.Body)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestContentType(t *testing.T) {
	tests := []struct {
		header string
		body   string
		want   string
	}{
		{"text/html", "", "text/html"},
		{"TEXT/HTML; Charset=UTF-8", "", "text/html"},
		{"application/xhtml+xml;charset=utf-8", "", "application/xhtml+xml"},
		{"text/html;;", "", "text/html"},
		{"", "<!DOCTYPE html><html>", "text/html"},
		{"", "%PDF-1.4", "application/pdf"},
		{"", "", ""},
		{"garbage", "<html>", "text/html"},
	}
	for _, tt := range tests {
		if got := contentType(tt.header, []byte(tt.body)); got != tt.want {
			t.Errorf("contentType(%q, %q) = %q, want %q", tt.header, tt.body, got, tt.want)
		}
	}
}
