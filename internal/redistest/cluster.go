package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a running Redis Cluster: masters*(1+replicas) redis-server processes with
// --cluster-enabled, joined by redis-cli --cluster create.
type Cluster struct {
	Nodes []*Server // in the order given to redis-cli: the first len/(1+replicas) start as masters
}

// NodeTimeout is the clusters' cluster-node-timeout: a master unreachable this long is
// failed over to its replica.
const NodeTimeout = time.Second

// clusterTimeout bounds how long StartCluster and WaitHealthy wait for the cluster to agree.
const clusterTimeout = 30 * time.Second

// StartCluster starts a cluster of masters masters with replicas replicas each for t, and
// registers the stop of every node with t.Cleanup. It returns once every node reports
// cluster_state:ok and every replica is in sync with its master. It skips t when redis-server
// or redis-cli is missing, or fails it under CI=true.
func StartCluster(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	return StartClusterWith(t, masters, replicas, Options{})
}

// StartClusterWith is StartCluster with the TLS and ACL users of o on every node: with TLS the
// nodes' bus and replication use TLS too.
func StartClusterWith(t testing.TB, masters, replicas int, o Options) *Cluster {
	t.Helper()
	bin := lookPath(t, "redis-server")
	cli := lookPath(t, "redis-cli")
	if masters < 3 {
		t.Fatalf("redistest: a Redis Cluster needs at least 3 masters, got %d", masters)
	}
	c := &Cluster{}
	extra := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.Itoa(int(NodeTimeout.Milliseconds())),
		"--cluster-replica-validity-factor", "0", "--shutdown-timeout", "0"}
	if o.TLS != nil {
		extra = append(extra, "--tls-cluster", "yes", "--tls-replication", "yes")
	}
	for range masters * (1 + replicas) {
		dir := t.TempDir()
		var s *Server
		var err error
		for range 5 { // a port picked free may be taken before redis binds it
			var port int
			if port, err = freeClusterPort(); err != nil {
				t.Fatalf("redistest: %v", err)
			}
			if s, err = start(bin, dir, port, o, extra); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		stopAtCleanup(t, s)
		c.Nodes = append(c.Nodes, s)
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if o.TLS != nil {
		args = append(args, "--tls", "--cacert", o.TLS.CA, "--cert", o.TLS.ClientCert, "--key", o.TLS.ClientKey)
	}
	if len(o.Users) > 0 {
		args = append(args, "--user", AdminUser, "--pass", AdminPassword, "--no-auth-warning")
	}
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if err := c.WaitHealthy(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return c
}

// Addrs are the nodes' addresses, 127.0.0.1:PORT.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		a[i] = s.Addr
	}
	return a
}

// URL is the first node's redis:// (or rediss://) URL: a cluster client discovers the others
// from it.
func (c *Cluster) URL() string { return c.Nodes[0].URL() }

// alive reports whether s's process is running.
func alive(s *Server) bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Masters returns the running nodes that are masters now (ROLE).
func (c *Cluster) Masters() ([]*Server, error) {
	var ms []*Server
	for _, s := range c.Nodes {
		if !alive(s) {
			continue
		}
		role, err := nodeRole(s)
		if err != nil {
			return nil, err
		}
		if role == "master" {
			ms = append(ms, s)
		}
	}
	return ms, nil
}

// WaitHealthy waits until every running node reports cluster_state:ok, knows every slot
// served, and each running replica's link to its master is up: after StartCluster, and after
// a master was killed and its replica promoted.
func (c *Cluster) WaitHealthy() error {
	deadline := time.Now().Add(clusterTimeout)
	for {
		why := c.unhealthy()
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster %v not healthy after %v: %s", c.Addrs(), clusterTimeout, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unhealthy says why the cluster is not healthy yet ("" when it is).
func (c *Cluster) unhealthy() string {
	for _, s := range c.Nodes {
		if !alive(s) {
			continue
		}
		info, err := nodeInfo(s, "CLUSTER", "INFO")
		if err != nil {
			return err.Error()
		}
		if info["cluster_state"] != "ok" || info["cluster_slots_ok"] != "16384" {
			return fmt.Sprintf("%s: cluster_state:%s cluster_slots_ok:%s", s.Addr, info["cluster_state"], info["cluster_slots_ok"])
		}
		repl, err := nodeInfo(s, "INFO", "replication")
		if err != nil {
			return err.Error()
		}
		if repl["role"] == "slave" && repl["master_link_status"] != "up" {
			return fmt.Sprintf("%s: replica's master link %s", s.Addr, repl["master_link_status"])
		}
	}
	return ""
}

// nodeInfo runs an INFO-like command on s and parses its "name:value" lines.
func nodeInfo(s *Server, cmd ...any) (map[string]string, error) {
	addr := s.Addr
	rdb := s.Client()
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	text, err := rdb.Do(ctx, cmd...).Text()
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", addr, cmd, err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// nodeRole is the first element of ROLE's reply on s: "master" or "slave".
func nodeRole(s *Server) (string, error) {
	addr := s.Addr
	rdb := s.Client()
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := rdb.Do(ctx, "ROLE").Slice()
	if err != nil || len(r) == 0 {
		return "", fmt.Errorf("%s: ROLE: %v", addr, err)
	}
	role, _ := r[0].(string)
	return role, nil
}

// freeClusterPort picks a free loopback port P whose cluster bus port P+10000 is free too.
func freeClusterPort() (int, error) {
	for range 100 {
		p := 20000 + rand.IntN(30000)
		a, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		a.Close()
		if err != nil {
			continue
		}
		b.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free port pair P, P+10000 found")
}
