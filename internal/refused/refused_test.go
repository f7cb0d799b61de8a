package refused

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestAddrRefusesAndStaysTaken: a connection to Addr is refused, and a listener asking the
// kernel for ports, or for that very port, never gets it while the test runs.
func TestAddrRefusesAndStaysTaken(t *testing.T) {
	addr := Addr(t)
	if _, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("listen on %s succeeded; the port is not held", addr)
	}
	for range 200 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		got := ln.Addr().String()
		ln.Close()
		if got == addr {
			t.Fatalf("the kernel handed out %s while it was held", addr)
		}
	}
}

// TestReleaseFreesThePort: once released, the port can be listened on.
func TestReleaseFreesThePort(t *testing.T) {
	p := Hold(t)
	p.Release()
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		t.Fatalf("listen on %s after Release: %v", p.Addr, err)
	}
	ln.Close()
	p.Release()
}
