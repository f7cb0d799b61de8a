package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one running redis-server.
type Server struct {
	Addr string // 127.0.0.1:PORT
	Dir  string // its working directory (the append-only file lives here)
	bin  string
	port int
	opts Options
	args []string // extra redis-server arguments (a cluster node's)
	cmd  *exec.Cmd
	done chan struct{} // closed when the current process has exited
}

// ClientCerts is what a TLS server asks of its clients' certificates (tls-auth-clients).
type ClientCerts string

const (
	ClientCertsNone     ClientCerts = "no"       // none asked
	ClientCertsOptional ClientCerts = "optional" // one is checked if given
	ClientCertsRequired ClientCerts = "yes"      // Redis' default: a client without one is refused
)

// Options say how each redis-server is started. The zero value is a plain server that any
// client on loopback may use.
type Options struct {
	// TLS, if not nil, makes the server speak TLS only (--port 0, --tls-port), with TLS's
	// server certificate; a cluster's nodes also talk to each other and replicate over TLS.
	TLS *Certs
	// ClientCerts is what a TLS server asks of clients; "" means ClientCertsNone.
	ClientCerts ClientCerts
	// Users are ACL users, each as an aclfile line after "user" ("alice on >pw ~crawl:* +@all").
	// When any is given the default user is off, so a client must name a user; the helpers of
	// this package use a user of their own (AdminUser) with every permission.
	Users []string
}

// AdminUser and AdminPassword are the user this package's own checks (PING, INFO, ROLE,
// redis-cli --cluster create, a replica's sync) log in as on a server started with
// Options.Users.
const (
	AdminUser     = "redistest"
	AdminPassword = "redistest-admin"
)

// serverArgs are the redis-server arguments that o adds for a server whose client port is
// port, with its files in dir.
func (o Options) serverArgs(dir string, port int) ([]string, error) {
	args := []string{"--port", strconv.Itoa(port)}
	if o.TLS != nil {
		clients := o.ClientCerts
		if clients == "" {
			clients = ClientCertsNone
		}
		args = []string{"--port", "0", "--tls-port", strconv.Itoa(port),
			"--tls-cert-file", o.TLS.ServerCert, "--tls-key-file", o.TLS.ServerKey,
			"--tls-ca-cert-file", o.TLS.CA, "--tls-auth-clients", string(clients)}
	}
	if len(o.Users) > 0 {
		acl := "user default off\nuser " + AdminUser + " on >" + AdminPassword + " ~* &* +@all\n"
		for _, u := range o.Users {
			acl += "user " + u + "\n"
		}
		path := filepath.Join(dir, "users.acl")
		if err := os.WriteFile(path, []byte(acl), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--aclfile", path, "--masteruser", AdminUser, "--masterauth", AdminPassword)
	}
	return args, nil
}

// Client returns a new client for s with every permission: over TLS, and logged in as
// AdminUser, when s needs them. The caller closes it.
func (s *Server) Client() *redis.Client {
	o := &redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second}
	if s.opts.TLS != nil {
		o.TLSConfig = s.opts.TLS.ClientConfig()
	}
	if len(s.opts.Users) > 0 {
		o.Username, o.Password = AdminUser, AdminPassword
	}
	return redis.NewClient(o)
}

// startTimeout bounds how long Start waits for the server to answer PING.
const startTimeout = 20 * time.Second

// Start starts a plain redis-server for t and registers its stop with t.Cleanup. It skips t
// when redis-server is missing, or fails it under CI=true.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with the TLS and ACL users of o.
func StartWith(t testing.TB, o Options) *Server {
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
		s, err := start(bin, dir, port, o, nil)
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

func start(bin, dir string, port int, o Options, extra []string) (*Server, error) {
	own, err := o.serverArgs(dir, port)
	if err != nil {
		return nil, err
	}
	args := append(append(own, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "yes", "--dir", dir,
		"--protected-mode", "yes", "--daemonize", "no"), extra...)
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
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Dir: dir, bin: bin, port: port, opts: o, args: extra, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(startTimeout)
	for {
		if err := s.ping(); err == nil {
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

// URL is the server's address as a redis:// URL (database 0), rediss:// when it speaks TLS.
func (s *Server) URL() string {
	if s.opts.TLS != nil {
		return "rediss://" + s.Addr + "/0"
	}
	return "redis://" + s.Addr + "/0"
}

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
		if n, err = start(s.bin, s.Dir, s.port, s.opts, s.args); err == nil {
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

// ping checks that s's own process answers on s.Addr. Another test's server may hold the port
// (picked free by both, bound by the other first): its answer is an error, so that start tries
// another port instead of handing out a server two tests would share.
func (s *Server) ping() error {
	rdb := s.Client()
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	want := strconv.Itoa(s.PID())
	for _, line := range strings.Split(info, "\r\n") {
		if pid, ok := strings.CutPrefix(line, "process_id:"); ok {
			if pid != want {
				return fmt.Errorf("%s is served by process %s, not by redis-server %s", s.Addr, pid, want)
			}
			return nil
		}
	}
	return fmt.Errorf("%s: no process_id in INFO server", s.Addr)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
