package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is one running redis-server.
type Server struct {
	Addr string // 127.0.0.1:PORT
	Dir  string // its working directory (the append-only file lives here)
	bin  string
	port int
	args []string // extra redis-server arguments (a cluster node's)
	cmd  *exec.Cmd
	done chan struct{} // closed when the current process has exited
}

// startTimeout bounds how long Start waits for the server to answer PING.
const startTimeout = 20 * time.Second

// Start starts a redis-server for t and registers its stop with t.Cleanup. It skips t when
// redis-server is missing, or fails it under CI=true.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := lookPath(t, "redis-server")
	dir := t.TempDir()
	// A port picked by the kernel and released may be taken again before redis binds it; a
	// few attempts make that race harmless.
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s, err := start(bin, dir, port, nil)
		if err == nil {
			stopAtCleanup(t, s)
			return s
		}
		lastErr = err
	}
	t.Fatalf("redistest: %v", lastErr)
	return nil
}

// lookPath finds a Redis program on PATH: it skips t when the program is missing, or fails it
// under CI=true.
func lookPath(t testing.TB, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found on PATH under CI=true (.ci/run installs it): %v", name, err)
		}
		t.Skipf("%s not found on PATH: %v", name, err)
	}
	return bin
}

func stopAtCleanup(t testing.TB, s *Server) {
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("redistest: %v", err)
		}
	})
}

func start(bin, dir string, port int, extra []string) (*Server, error) {
	args := append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "yes", "--dir", dir,
		"--protected-mode", "yes", "--daemonize", "no"}, extra...)
	cmd := exec.Command(bin, args...)
	log, err := os.Create(dir + "/redis.log")
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Dir: dir, bin: bin, port: port, args: extra, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(startTimeout)
	for {
		if err := ping(s.Addr); err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			b, _ := os.ReadFile(dir + "/redis.log")
			return nil, fmt.Errorf("redis-server on port %d exited at start: %s", port, lastLines(string(b), 5))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("redis-server on %s did not answer PING within %v", s.Addr, startTimeout)
		}
	}
}

// URL is the server's address as a redis:// URL (database 0).
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// PID is the server process's id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Stop ends the server with SIGTERM (SIGKILL after 10 s) and waits for it to exit. It may be
// called more than once.
func (s *Server) Stop() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	if err := syscall.Kill(s.PID(), syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop redis-server %d: %w", s.PID(), err)
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(10 * time.Second):
		syscall.Kill(s.PID(), syscall.SIGKILL)
		<-s.done
		return fmt.Errorf("redis-server %d ignored SIGTERM for 10 s; killed", s.PID())
	}
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it to exit.
func (s *Server) Kill() error {
	if err := syscall.Kill(s.PID(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill redis-server %d: %w", s.PID(), err)
	}
	<-s.done
	return nil
}

// Restart starts the server again, after Stop or Kill, on the same port and directory, so it
// reloads its append-only file and clients reconnect to the same address.
func (s *Server) Restart() error {
	var err error
	for range 5 { // the port may linger briefly after the old process exits
		var n *Server
		if n, err = start(s.bin, s.Dir, s.port, s.args); err == nil {
			s.cmd, s.done = n.cmd, n.done
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ping sends one inline PING and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
