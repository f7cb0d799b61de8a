package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The store's, the keepers', the frontier's and the fleet view's tests, run again on a real
// 3-master Redis Cluster through a cluster client: no script, transaction or read crosses a
// slot, and idle detection and counts read per partition.
func TestOnCluster(t *testing.T) {
	parallel(t)
	onCluster(t,
		TestOpenChecksConfiguration,
		TestOpenReadsTheServer,
		TestOnePartitionOneOwner,
		TestAddIsExactlyOnceAcrossWorkers,
		TestCompleteStatesAndLinks,
		TestCompleteBatch,
		TestRetryWaitsForNotBeforeOnRedisClock,
		TestTakeoverReclaimsAndFences,
		TestPutBackKeepsOrderAndAttempts,
		TestHostBudget,
		TestHostStateFollowsThePartition,
		TestRobotsFollowThePartition,
		TestHostStateExpires,
		TestKeepersShareAndRebalance,
		TestKeeperTakesOverFromDeadWorker,
		TestWorkersShareCrawlAndSurviveADeadOne,
		TestFrontierCrawlsToTheEnd,
		TestFrontierRefusesAfterTakeover,
		TestFrontierDrainsSurplus,
		TestReadViewCountsAndWorkers,
		TestReadViewNoCrawl,
		TestPlaceByAddress,
		TestForwardWaitsForPlacement,
	)
}

// On a cluster with replicas, Forward trims an outbox only once the replicas of the nodes it
// wrote to have the links: with a replica stopped, it fails and the outbox keeps the links;
// with the replica back, it delivers them.
func TestForwardWaitsForReplicas(t *testing.T) {
	parallel(t)
	c := redistest.StartCluster(t, 3, 1)
	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: time.Second})
	defer rdb.Close()
	s, err := Open(ctx, rdb, "t", "w", &Options{Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	o := queueAndOwn(t, s, "a.example", 1)
	l, ok, _, err := s.Take(ctx, o, "a.example")
	if err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	// links to another partition (those of the page's own are queued by Complete itself)
	other := ""
	for i := 0; other == ""; i++ {
		if h := fmt.Sprintf("b%d.example", i); PartitionOf(h, 4) != o.Partition {
			other = h
		}
	}
	q := PartitionOf(other, 4)
	links := entries(other, 2)
	if err := s.Complete(ctx, o, l, frontier.Result{Kind: frontier.Fetched, Links: links}); err != nil {
		t.Fatal(err)
	}
	master, err := s.nodeOf(ctx, s.k.counts(q))
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		s.replicas = nil // read again (a replica may still be syncing)
		s.mu.Unlock()
		n := s.replicasOf(ctx, master)
		if n == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the master of partition %d has %d replicas online, want 1", q, n)
		}
	}
	var replica *redistest.Server
	for _, n := range c.Nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		info, _ := c.Info(ctx, "replication").Result()
		c.Close()
		if strings.Contains(info, "role:slave") && strings.Contains(info, "master_port:"+strings.Split(master.Options().Addr, ":")[1]+"\r") {
			replica = n
		}
	}
	if replica == nil {
		t.Fatalf("no replica of partition %d's master found", q)
	}
	syscall.Kill(replica.PID(), syscall.SIGSTOP)
	_, err = s.Forward(ctx, o)
	syscall.Kill(replica.PID(), syscall.SIGCONT)
	if !errors.Is(err, errNotReplicated) {
		t.Fatalf("Forward with the replica stopped: %v, want errNotReplicated", err)
	}
	if n, _ := rdb.LLen(ctx, s.k.outbox(o.Partition)).Result(); n != 1 {
		t.Fatalf("outbox holds %d payloads after the refused Forward, want 1", n)
	}
	// (the refused Forward's writes reached the master: the links wait in the inbox already,
	// and the owner's seen-set records them once)
	if _, err := s.Forward(ctx, o); err != nil {
		t.Fatalf("Forward with the replica back: %v", err)
	}
	if n, _ := rdb.LLen(ctx, s.k.outbox(o.Partition)).Result(); n != 0 {
		t.Errorf("outbox holds %d payloads after Forward, want 0", n)
	}
	mustAcquire(t, s, q)
	if c, err := s.Counts(ctx); err != nil || c.Queued != 2 || c.Fetched != 1 {
		t.Errorf("counts %+v, %v; want the 2 links queued and 1 fetched", c, err)
	}
}

// A failover on a cluster (a master killed, its replica promoted) is found as a restart: the
// promoted replica is a master whose run_id the worker had not read, and it may lack the last
// writes its master acknowledged.
func TestRestartedFindsFailover(t *testing.T) {
	parallel(t)
	c := redistest.StartCluster(t, 3, 1)
	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: clusterReload})
	defer rdb.Close()
	s, err := Open(ctx, rdb, "t", "w", &Options{Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	if addr, complete, err := s.restarted(ctx); addr != "" || !complete || err != nil {
		t.Fatalf("restarted() = %q, %v, %v before any failover", addr, complete, err)
	}
	ms, err := c.Masters()
	if err != nil || len(ms) != 3 {
		t.Fatalf("masters %v, err %v; want 3", ms, err)
	}
	dead := ms[0].Addr
	if err := ms[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(); err != nil {
		t.Fatal(err)
	}
	// the client learns the promoted replica at a reload of the slots' owners; until then the
	// dead master is not read (and the read is not complete)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		addr, _, err := s.restarted(ctx)
		if addr != "" {
			if addr == dead {
				t.Fatalf("restarted() names the dead master %s", dead)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failover found 30 s after it (last: %v)", err)
		}
	}
	if addr, complete, err := s.restarted(ctx); addr != "" || !complete || err != nil {
		t.Errorf("restarted() = %q, %v, %v once the failover was found", addr, complete, err)
	}
}
