package refused

import (
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// Port is a loopback port held by a TCP socket that is bound without SO_REUSEADDR and never
// listens: every connection to it is refused and no other socket can bind it until Release.
type Port struct {
	Addr string // "127.0.0.1:PORT"

	fd   int
	once sync.Once
}

// Hold binds a free loopback port and holds it until Release or the end of tb.
func Hold(tb testing.TB) *Port {
	tb.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		tb.Fatalf("refused port: socket: %v", err)
	}
	syscall.CloseOnExec(fd)
	p := &Port{fd: fd}
	tb.Cleanup(p.Release)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		tb.Fatalf("refused port: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatalf("refused port: getsockname: %v", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		tb.Fatalf("refused port: bound to %T", sa)
	}
	p.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port))
	return p
}

// Release frees the port, so that the test may listen on it. Calls after the first do nothing.
func (p *Port) Release() { p.once.Do(func() { syscall.Close(p.fd) }) }

// Addr holds a refusing port until the end of tb and returns its "127.0.0.1:PORT".
func Addr(tb testing.TB) string {
	tb.Helper()
	return Hold(tb).Addr
}
