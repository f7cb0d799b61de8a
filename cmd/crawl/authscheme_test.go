package main

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// chanListener hands out the connections a demux sorted to it.
type chanListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l *chanListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *chanListener) Addr() net.Addr { return l.addr }

// peekedConn is a connection whose first bytes were read into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// sameHostTLSAndPlain serves https and plain http on one loopback port, as a host serves both
// on 443 and 80: the two share a host key (and so the crawl's politeness), but not an origin.
// It returns the port's host:port.
func sameHostTLSAndPlain(t *testing.T, tlsH, plainH http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := &chanListener{addr: ln.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
	pl := &chanListener{addr: ln.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				br := bufio.NewReader(c)
				b, err := br.Peek(1)
				if err != nil {
					c.Close()
					return
				}
				to := pl
				if b[0] == 0x16 { // a TLS handshake record
					to = tl
				}
				select {
				case to.conns <- &peekedConn{c, br}:
				case <-to.done:
					c.Close()
				}
			}()
		}
	}()
	ts := httptest.NewUnstartedServer(tlsH)
	ts.Listener = tl
	ts.StartTLS()
	ps := httptest.NewUnstartedServer(plainH)
	ps.Listener = pl
	ps.Start()
	t.Cleanup(func() { ln.Close(); ts.Close(); ps.Close() })
	return ln.Addr().String()
}

// TestAuthNotSentOverPlainHTTP: credentials given for https (a seed's user:password@, or --auth
// HOST) are sent to the https origin only; a plain-http link on the same host and port, and a
// redirect from https down to http, never carry Authorization.
func TestAuthNotSentOverPlainHTTP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args func(hostport string) []string
	}{
		{"seed userinfo", func(hp string) []string { return []string{"https://alice:PW@" + hp + "/"} }},
		{"--auth host", func(hp string) []string { return []string{"--auth", hp + "=alice:PW", "https://" + hp + "/"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var tlsAuth, plainSeen []string
			var hp string
			tlsH := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				tlsAuth = append(tlsAuth, r.URL.Path+" "+r.Header.Get("Authorization"))
				mu.Unlock()
				switch r.URL.Path {
				case "/robots.txt":
					http.NotFound(w, r)
				case "/redir":
					http.Redirect(w, r, "http://"+hp+"/after-redirect", http.StatusFound)
				default:
					w.Header().Set("Content-Type", "text/html")
					w.Write([]byte(`<a href="http://` + hp + `/plain-link">plain</a> <a href="/redir">r</a>`))
				}
			})
			plainH := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				plainSeen = append(plainSeen, r.URL.Path+" "+r.Header.Get("Authorization"))
				mu.Unlock()
				w.Header().Set("Content-Type", "text/html")
				w.Write([]byte("plain"))
			})
			hp = sameHostTLSAndPlain(t, tlsH, plainH)
			var out, errb bytes.Buffer
			args := append([]string{"--quiet", "--insecure", "--data", t.TempDir()}, tc.args(hp)...)
			if code := runCmd(args, &out, &errb); code != exitOK {
				t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
			}
			mu.Lock()
			defer mu.Unlock()
			var plainPaths []string
			for _, s := range plainSeen {
				path, auth, _ := strings.Cut(s, " ")
				plainPaths = append(plainPaths, path)
				if auth != "" {
					t.Errorf("the plain-http server received Authorization for %s", path)
				}
			}
			if !strings.Contains(strings.Join(plainPaths, " "), "/plain-link") || !strings.Contains(strings.Join(plainPaths, " "), "/after-redirect") {
				t.Errorf("plain server saw %q; want /plain-link and /after-redirect fetched", plainPaths)
			}
			for _, s := range tlsAuth {
				if path, auth, _ := strings.Cut(s, " "); auth == "" {
					t.Errorf("the https server received %s without the credentials", path)
				}
			}
		})
	}
}

// TestAuthOrigin: what origin an --auth HOST names; a bare host is https.
func TestAuthOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"Example.com":              "https://example.com:443",
		"example.com:8080":         "https://example.com:8080",
		"http://example.com":       "http://example.com:80",
		"http://example.com:8080/": "http://example.com:8080",
		"https://[::1]:8443":       "https://[::1]:8443",
		"":                         "",
		"ftp://example.com":        "",
		"http://u@example.com":     "",
		"example.com/path":         "",
		"http://example.com/path":  "",
		"example.com:99999":        "",
	} {
		got, err := authOrigin(in)
		if want == "" && err == nil || want != "" && got != want {
			t.Errorf("authOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
