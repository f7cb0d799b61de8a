package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestStartAnswersAndStops(t *testing.T) {
	s := Start(t)
	if err := s.ping(); err != nil {
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

// A server started on a port another server holds is refused, not handed out as the other:
// two tests (or two test processes) that picked the same free port would share one Redis.
func TestStartRefusesAPortAnotherServerHolds(t *testing.T) {
	a := Start(t)
	s, err := start(a.bin, t.TempDir(), a.port, Options{}, nil)
	if err == nil {
		s.Stop()
		t.Fatalf("a second redis-server on %s was started: its PING was answered by the first", a.Addr)
	}
	if err := a.ping(); err != nil {
		t.Fatalf("the first server: %v", err)
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

// A 3-master cluster answers a key on any node through a cluster client; with replicas, a
// master killed is replaced by its replica and the key is still there.
func TestClusterFailover(t *testing.T) {
	c := StartCluster(t, 3, 1)
	if len(c.Nodes) != 6 {
		t.Fatalf("%d nodes, want 6", len(c.Nodes))
	}
	ctx := context.Background()
	// go-redis learns a new master from a reload of the slots, not from a connection error
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.Nodes[0].Addr}, ClusterStateReloadInterval: 200 * time.Millisecond})
	defer rdb.Close()
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	t.Logf("failover in %v", failOver(ctx, t, c, rdb, keys).Round(time.Millisecond))
}

// failOver writes each of keys (its own name as its value) through rdb, waiting for a replica
// to hold it, kills the first master, waits for the cluster to be healthy again with 3
// masters (a replica promoted), and reads every key back. It returns the time from the kill to
// a healthy cluster.
func failOver(ctx context.Context, t *testing.T, c *Cluster, rdb *redis.ClusterClient, keys []string) time.Duration {
	t.Helper()
	for _, k := range keys {
		if err := rdb.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		if err := rdb.Wait(ctx, 1, time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := c.Masters()
	if err != nil || len(ms) != 3 {
		t.Fatalf("masters %v, err %v; want 3", ms, err)
	}
	if err := ms[0].Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.WaitHealthy(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if ms, _ := c.Masters(); len(ms) != 3 {
		t.Fatalf("%d masters after the failover, want 3 (a replica promoted)", len(ms))
	}
	for _, k := range keys {
		var v string
		for range 50 { // the client learns the new master on its first errors
			if v, err = rdb.Get(ctx, k).Result(); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil || v != k {
			t.Fatalf("GET %s after the failover: %q, %v", k, v, err)
		}
	}
	return took
}
