package dnstest

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// DefaultTTL is the TTL of answers when Options.TTL is 0.
const DefaultTTL = 60 * time.Second

// Options configures Start. A nil *Options answers NXDOMAIN to every name, at once.
type Options struct {
	// Resolve returns the addresses of name (lowercase, without the trailing dot); none means
	// the name does not exist (NXDOMAIN). IPv4 addresses answer A queries and IPv6 ones AAAA; a
	// name with addresses of one family answers queries for the other with no records (NODATA).
	// It is called from many goroutines at once.
	Resolve func(name string) []netip.Addr
	// Delay, if set, returns how long to hold each answer for name before sending it. Queries
	// are served in parallel, so a slow name delays only its own answers.
	Delay func(name string) time.Duration
	// TTL of every record; NXDOMAIN and NODATA answers carry an SOA whose minimum (the
	// negative-caching TTL) is the same. 0 means DefaultTTL; it is truncated to whole seconds.
	TTL time.Duration
}

// Server is a running DNS server on 127.0.0.1. It is safe for concurrent use by multiple
// goroutines.
type Server struct {
	opts    Options
	addr    string
	udp     *dns.Server
	tcp     *dns.Server
	closing chan struct{}
	once    sync.Once

	mu      sync.Mutex
	queries map[string]int // by name, every query type together
	total   int
}

// Start serves DNS on a free port of 127.0.0.1, over UDP and TCP. The caller must call Close.
func Start(opts *Options) (*Server, error) {
	s := &Server{closing: make(chan struct{}), queries: map[string]int{}}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.TTL <= 0 {
		s.opts.TTL = DefaultTTL
	}
	pc, ln, err := listen()
	if err != nil {
		return nil, err
	}
	s.addr = pc.LocalAddr().String()
	h := dns.HandlerFunc(s.serve)
	s.udp = &dns.Server{PacketConn: pc, Handler: h}
	s.tcp = &dns.Server{Listener: ln, Handler: h}
	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		errc := make(chan error, 1)
		go func() { errc <- srv.ActivateAndServe() }()
		select {
		case <-started:
		case err := <-errc: // it never started: nothing is left running
			s.Close()
			return nil, fmt.Errorf("dnstest: %w", err)
		}
	}
	return s, nil
}

// listen binds UDP and TCP on one free port of 127.0.0.1, trying a few ports in case the TCP
// side of the one UDP was given is taken.
func listen() (net.PacketConn, net.Listener, error) {
	var err error
	for range 20 {
		var pc net.PacketConn
		pc, err = net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			return nil, nil, fmt.Errorf("dnstest: %w", err)
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp4", pc.LocalAddr().String()); err == nil {
			return pc, ln, nil
		}
		pc.Close()
	}
	return nil, nil, fmt.Errorf("dnstest: no port free for both UDP and TCP: %w", err)
}

// Addr returns the server's address, "127.0.0.1:PORT", for UDP and TCP alike.
func (s *Server) Addr() string { return s.addr }

// Queries returns how many queries for name (any type: an A and an AAAA query count two) the
// server has received. name is matched without case and without a trailing dot.
func (s *Server) Queries(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[canonical(name)]
}

// Total returns how many queries the server has received.
func (s *Server) Total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Close stops the server; answers still held by a Delay are dropped unsent. It returns once
// every handler has returned, and is safe to call more than once.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closing)
		for _, srv := range []*dns.Server{s.udp, s.tcp} {
			// An error means the server never started; then nothing of it is left running.
			_ = srv.Shutdown()
		}
	})
}

func canonical(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

// serve answers one query.
func (s *Server) serve(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if len(r.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(m) // a client that went away is not the server's problem
		return
	}
	q := r.Question[0]
	name := canonical(q.Name)
	s.mu.Lock()
	s.queries[name]++
	s.total++
	s.mu.Unlock()
	if s.opts.Delay != nil && !s.hold(s.opts.Delay(name)) {
		return
	}
	var addrs []netip.Addr
	if s.opts.Resolve != nil {
		addrs = s.opts.Resolve(name)
	}
	ttl := uint32(s.opts.TTL / time.Second)
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: q.Name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
	}
	for _, a := range addrs {
		a = a.Unmap()
		switch {
		case q.Qtype == dns.TypeA && a.Is4():
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr(dns.TypeA), A: a.AsSlice()})
		case q.Qtype == dns.TypeAAAA && a.Is6():
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: a.AsSlice()})
		}
	}
	if len(addrs) == 0 {
		m.Rcode = dns.RcodeNameError
	}
	if len(m.Answer) == 0 { // NXDOMAIN or NODATA: the SOA tells how long to cache the absence
		m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
			Ns: "ns.dnstest.", Mbox: "hostmaster.dnstest.", Serial: 1, Refresh: ttl, Retry: ttl, Expire: ttl, Minttl: ttl}}
	}
	_ = w.WriteMsg(m)
}

// hold waits d, or until Close; it reports whether the answer should still be sent.
func (s *Server) hold(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.closing:
		return false
	}
}
