package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// link is a network path between the crawler and a site: every chunk of bytes, in each
// direction, arrives delay ± jitter (uniform) after it was sent, and never before the chunk sent
// ahead of it on the same connection (a path reorders nothing within a TCP stream). Loopback has
// neither, so requests paced 1/L apart arrive 1/L apart; across a real network they arrive
// bunched and spread, and a server's limiter counts them as they arrive. Linux's netem would do
// this in the kernel, but it needs the sch_netem module and CAP_NET_ADMIN, which a container
// often lacks.
type link struct {
	delay, jitter time.Duration
}

func (l link) String() string {
	return fmt.Sprintf("delay %s ± %s each way", l.delay, l.jitter)
}

// on reports whether the link delays anything.
func (l link) on() bool { return l.delay > 0 || l.jitter > 0 }

// sample draws one chunk's transit time.
func (l link) sample() time.Duration {
	d := l.delay
	if l.jitter > 0 {
		d += time.Duration(rand.Int64N(int64(2*l.jitter)+1)) - l.jitter
	}
	return max(d, 0)
}

// forward listens on a free loopback port and carries every connection made to it to
// 127.0.0.1:to over the link. It returns the port and a stop that closes the listener and every
// connection still open.
func (l link) forward(to int) (port int, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, err
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", to))
			if err != nil {
				c.Close()
				continue
			}
			track(c)
			track(s)
			wg.Add(2)
			go func() { defer wg.Done(); l.carry(s, c) }()
			go func() { defer wg.Done(); l.carry(c, s) }()
		}
	}()
	stop = func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
	return ln.Addr().(*net.TCPAddr).Port, stop, nil
}

// chunk is bytes in transit and when they arrive; a nil b is the sender's end of stream.
type chunk struct {
	b   []byte
	due time.Time
}

// carry copies src to dst over the link: a reader stamps each chunk with its arrival time, a
// writer delivers it then. At the end of src, dst's write side is closed after the last chunk
// arrives (as a FIN would); on an error both ends are closed.
func (l link) carry(dst, src net.Conn) {
	inTransit := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range inTransit {
			time.Sleep(time.Until(c.due))
			if c.b == nil {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				return
			}
			if _, err := dst.Write(c.b); err != nil {
				dst.Close()
				src.Close()
				return
			}
		}
	}()
	var last time.Time
	stamp := func() time.Time {
		due := time.Now().Add(l.sample())
		if due.Before(last) {
			due = last
		}
		last = due
		return due
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			inTransit <- chunk{b: append([]byte(nil), buf[:n]...), due: stamp()}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				inTransit <- chunk{due: stamp()}
			} else {
				dst.Close()
			}
			break
		}
	}
	close(inTransit)
	<-done
}
