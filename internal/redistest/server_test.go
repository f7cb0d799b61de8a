package redistest

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strings"
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

// After a SIGKILL and a restart the server answers on the same address with the data its
// append-only file held.
func TestKillRestartKeepsData(t *testing.T) {
	s := Start(t)
	send := func(cmd string) string {
		t.Helper()
		c, err := net.Dial("tcp", s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte(cmd + "\r\n"))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(line)
	}
	send("CONFIG SET appendfsync always")
	if got := send("SET k v"); got != "+OK" {
		t.Fatalf("SET: %q", got)
	}
	pid := s.PID()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid {
		t.Fatal("same process after restart")
	}
	if got := send("GET k"); got != "$1" {
		t.Fatalf("GET k after restart: %q, want the value back", got)
	}
}

// Under CI=true a missing redis-server fails the test instead of skipping it; elsewhere it
// skips. Checked by running this test binary again with an empty PATH.
func TestMissingServer(t *testing.T) {
	if os.Getenv("REDISTEST_CHILD") == "1" {
		Start(t)
		t.Fatal("Start returned without redis-server on PATH")
	}
	for _, tc := range []struct {
		ci       string
		wantFail bool
		want     string
	}{
		{"true", true, "not found on PATH under CI=true"},
		{"", false, "SKIP: TestMissingServer"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingServer$", "-test.v")
		cmd.Env = []string{"REDISTEST_CHILD=1", "PATH=" + t.TempDir(), "CI=" + tc.ci}
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tc.wantFail || !strings.Contains(string(out), tc.want) {
			t.Errorf("CI=%q: failed=%v, want %v, output lacks %q or is:\n%s", tc.ci, failed, tc.wantFail, tc.want, out)
		}
	}
}
