package simweb

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// A request's arrival, with Options.KernelArrival, is when the kernel received the bytes of it
// the server read last (SO_TIMESTAMPNS on each accepted connection), not when its handler ran:
// on a loaded machine the handler may run tens of milliseconds later, and requests queued
// meanwhile would seem to arrive together.

// stampListener accepts connections whose reads record the kernel's receive time.
type stampListener struct{ net.Listener }

func newStampListener(ln net.Listener) stampListener {
	stampOn(ln)
	return stampListener{ln}
}

func (l stampListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newStampConn(c), nil
}

// stampConn is a connection whose reads record when the kernel received the data they return
// (zero where the platform does not say).
type stampConn struct {
	net.Conn
	read func(p []byte) (int, time.Time, error) // nil: plain reads, no stamps

	mu   sync.Mutex
	last time.Time // guarded by mu
}

func (c *stampConn) Read(p []byte) (int, error) {
	if c.read == nil {
		return c.Conn.Read(p)
	}
	n, at, err := c.read(p)
	if !at.IsZero() {
		c.mu.Lock()
		c.last = at
		c.mu.Unlock()
	}
	return n, err
}

// stamp returns the kernel's receive time of the data the last read returned (zero if none).
func (c *stampConn) stamp() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

type connKey struct{}

// withConn is an http.Server's ConnContext: it keeps the connection for arrival.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// arrival is r's arrival time: the kernel's receive time with Options.KernelArrival where
// the platform gives one, else the Web's clock.
func (w *Web) arrival(r *http.Request) time.Time {
	if t, ok := Arrival(r); ok {
		return t
	}
	return w.clock()
}

// KernelArrivals sets srv, which is to serve ln, to record each request's arrival as a Web
// with Options.KernelArrival does, and returns the listener to serve: a test's own server
// then judges a client's pacing by Arrival, not by when its handlers run.
func KernelArrivals(srv *http.Server, ln net.Listener) net.Listener {
	srv.ConnContext = withConn
	l := newStampListener(ln)
	stampsReady()
	return l
}

// Arrival returns the kernel's receive time of r's last bytes, for a request served on a
// listener of KernelArrivals (or of a Web with Options.KernelArrival); false where there is
// none (another listener, or a platform other than Linux).
func Arrival(r *http.Request) (time.Time, bool) {
	if c, ok := r.Context().Value(connKey{}).(*stampConn); ok {
		if t := c.stamp(); !t.IsZero() {
			return t, true
		}
	}
	return time.Time{}, false
}
