package redistest

import (
	"net"
	"testing"
)

func TestStartAnswersAndStops(t *testing.T) {
	s := Start(t)
	if err := ping(s.Addr); err != nil {
		t.Fatalf("ping %s: %v", s.Addr, err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", s.Addr); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Stop", s.Addr)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestTwoServersAreIndependent(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Addr == b.Addr || a.PID() == b.PID() {
		t.Fatalf("two Starts share %s / pid %d", a.Addr, a.PID())
	}
}
