package simweb

import (
	"io"
	"net"
	"syscall"
	"time"
	"unsafe"
)

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
