package metrics

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Server serves metrics over HTTP: /metrics, and a pointer to it at /.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Listen binds addr (host:port; ":9090" listens on every address, "127.0.0.1:0" picks a free
// loopback port) and serves h at /metrics until Close. Binding happens before Listen returns,
// so a bad or busy address is reported at once.
func Listen(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>crawl metrics</title><p><a href="/metrics">/metrics</a>`)
	})
	s := &Server{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	return s, nil
}

// Addr returns the address the server listens on (with the port chosen, if it was 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server at once and waits for its goroutine to end.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
