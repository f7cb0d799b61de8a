package simweb

import (
	"io"
	"net"
	"syscall"
	"time"
	"unsafe"
)

// stampOn turns SO_TIMESTAMPNS on for a listening TCP socket, so that the connections it
// accepts have it from their first byte (a byte received before the option is set carries no
// time; while any socket has it on, the kernel stamps every packet it receives).
func stampOn(ln net.Listener) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return
	}
	if rc, err := tl.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
		})
	}
}

// newStampConn turns on SO_TIMESTAMPNS for a TCP connection and reads it with recvmsg, whose
// control message carries the receive time of the data returned. Any other connection, or one
// the option cannot be set on, is read plainly.
func newStampConn(c net.Conn) *stampConn {
	sc := &stampConn{Conn: c}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return sc
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return sc
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return sc
	}
	sc.read = func(p []byte) (int, time.Time, error) {
		if len(p) == 0 {
			return 0, time.Time{}, nil
		}
		var oob [128]byte
		var n, oobn int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, oobn, _, _, rerr = syscall.Recvmsg(int(fd), p, oob[:], 0)
			return rerr != syscall.EAGAIN
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return 0, time.Time{}, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
		}
		if n == 0 {
			return 0, time.Time{}, io.EOF
		}
		return n, parseStamp(oob[:oobn]), nil
	}
	return sc
}

// parseStamp returns the SCM_TIMESTAMPNS time in control messages b (zero if none).
func parseStamp(b []byte) time.Time {
	msgs, err := syscall.ParseSocketControlMessage(b)
	if err != nil {
		return time.Time{}
	}
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SCM_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(syscall.Timespec{})) {
			ts := (*syscall.Timespec)(unsafe.Pointer(&m.Data[0]))
			return time.Unix(ts.Sec, ts.Nsec)
		}
	}
	return time.Time{}
}

// stampsReady waits, up to a second, until the kernel stamps the packets it receives: the
// first socket to ask turns the stamps on through a deferred kernel job, so the first packets
// after it may carry no time. The Web's listeners keep them on while it runs.
func stampsReady() {
	deadline := time.Now().Add(time.Second)
	for !probeStamp() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// probeStamp sends one byte over a new loopback connection and reports whether it came with
// a receive time.
func probeStamp() bool {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return false
	}
	defer ln.Close()
	stampOn(ln)
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		return false
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		return false
	}
	defer s.Close()
	if _, err := c.Write([]byte{0}); err != nil {
		return false
	}
	s.SetReadDeadline(time.Now().Add(time.Second))
	sc := newStampConn(s)
	if _, err := sc.Read(make([]byte, 1)); err != nil {
		return false
	}
	return !sc.stamp().IsZero()
}
