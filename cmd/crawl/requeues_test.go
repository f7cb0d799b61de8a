package main

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/fleet"
)

// requeues watches the MONITOR stream of each Redis node of a crawl (which shows the commands
// scripts run) for the LPUSHes that return a URL to the head of its host's queue: a new owner
// reclaiming the URLs in flight when it acquires a partition, or a worker giving a lease back
// (a request cut short, a partition drained or released). No other write puts a URL back at
// a queue's head; new and retried URLs go to its tail (RPUSH). A URL leased once more is
// fetched once more only after such a return, so every duplicate fetch of a URL must be
// matched by one. It also counts the saves of each host's robots.txt to Redis (a SET of its
// robots key), which a host's later owners load instead of fetching it again. (A replica's MONITOR shows nothing of what it replicates: once promoted,
// its stream shows its own commands.)
type requeues struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
	byURL  map[string]int
	robots map[string]int  // robots.txt saved for the hosts' later owners, by host
	seen   map[string]bool // markers seen, by node address and marker
	err    error           // a line that could not be read
	nodes  []*monitorStream
}

// monitorStream is one node's MONITOR connection.
type monitorStream struct {
	addr string
	conn net.Conn
	done chan struct{} // closed when the stream ended (the node stopped, or the test ended)
}

// watchRequeues starts watching the Redis nodes at addrs for crawl's queues; it stops at the
// test's end.
func watchRequeues(t testing.TB, crawl string, addrs ...string) *requeues {
	t.Helper()
	r := &requeues{t: t, prefix: "crawl:" + crawl + ":{", byURL: map[string]int{}, robots: map[string]int{}, seen: map[string]bool{}}
	for _, addr := range addrs {
		r.watch(addr)
	}
	return r
}

// watch starts watching the node at addr (again, after a restart).
func (r *requeues) watch(addr string) {
	r.t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		r.t.Fatalf("MONITOR %s: %v", addr, err)
	}
	br := bufio.NewReaderSize(conn, 1<<16)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		r.t.Fatalf("MONITOR %s: %v", addr, err)
	}
	if line, err := br.ReadString('\n'); err != nil || line != "+OK\r\n" {
		r.t.Fatalf("MONITOR %s: %q, %v", addr, line, err)
	}
	m := &monitorStream{addr: addr, conn: conn, done: make(chan struct{})}
	r.mu.Lock()
	r.nodes = append(r.nodes, m)
	r.mu.Unlock()
	go func() {
		defer close(m.done)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			r.note(addr, line)
		}
	}()
	r.t.Cleanup(func() { conn.Close(); <-m.done })
}

// note records one MONITOR line: an LPUSH to one of the crawl's queues, or a marker.
func (r *requeues) note(addr, line string) {
	_, rest, ok := strings.Cut(line, "] ")
	if !ok {
		return
	}
	args, err := monitorArgs(strings.TrimRight(rest, "\r\n"))
	if err != nil {
		r.mu.Lock()
		r.err = fmt.Errorf("MONITOR line %q: %w", line, err)
		r.mu.Unlock()
		return
	}
	if len(args) == 2 && strings.EqualFold(args[0], "echo") {
		r.mu.Lock()
		r.seen[addr+" "+args[1]] = true
		r.mu.Unlock()
		return
	}
	if len(args) < 3 || !strings.HasPrefix(args[1], r.prefix) {
		return
	}
	if _, host, ok := strings.Cut(args[1], "}:r:"); ok && strings.EqualFold(args[0], "set") {
		r.mu.Lock()
		r.robots[host]++
		r.mu.Unlock()
		return
	}
	if !strings.EqualFold(args[0], "lpush") || !strings.Contains(args[1], "}:q:") {
		return
	}
	_, host, _ := strings.Cut(args[1], "}:q:")
	for _, it := range args[2:] {
		u, err := fleet.ItemURL(host, it)
		r.mu.Lock()
		if err != nil || u == "" {
			r.err = fmt.Errorf("MONITOR: queue item %q: not a URL (%v)", it, err)
		} else {
			r.byURL[u]++
		}
		r.mu.Unlock()
	}
}

// monitorArgs splits the arguments of a MONITOR line: each is double-quoted, with C escapes
// (\" \\ \n \xHH…), which Go's unquoting reads.
func monitorArgs(s string) ([]string, error) {
	var args []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] != '"' {
			return nil, fmt.Errorf("argument not quoted at %q", s)
		}
		end := 1
		for end < len(s) && s[end] != '"' {
			if s[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(s) {
			return nil, fmt.Errorf("unterminated argument %q", s)
		}
		a, err := strconv.Unquote(s[:end+1])
		if err != nil {
			return nil, fmt.Errorf("argument %s: %w", s[:end+1], err)
		}
		args = append(args, a)
		s = s[end+1:]
	}
	return args, nil
}

// counts waits until each stream still open has shown every command its node ran before the
// call (an ECHO of a marker sent to the node comes back through its MONITOR after them) and
// returns how many times each URL was returned to its queue, and how many times each host's
// robots.txt was saved to Redis. A node that stopped (killed by
// the test) is passed over: what it ran before is in its stream. A nil r watched nothing (a
// server MONITOR cannot reach, behind TLS and ACL): no URL counts as returned, so a test on it
// allows no URL fetched twice.
func (r *requeues) counts(ctx context.Context) (back, robots map[string]int) {
	if r == nil {
		return map[string]int{}, map[string]int{}
	}
	r.t.Helper()
	marker := fmt.Sprintf("requeues-marker-%d", time.Now().UnixNano())
	var wait []string
	r.mu.Lock()
	nodes := append([]*monitorStream(nil), r.nodes...)
	r.mu.Unlock()
	for _, m := range nodes {
		select {
		case <-m.done:
			continue
		default:
		}
		if err := echo(ctx, m.addr, marker); err != nil {
			r.t.Logf("MONITOR %s: node not answering (%v): its stream is taken as it is", m.addr, err)
			continue
		}
		wait = append(wait, m.addr+" "+marker)
	}
	for {
		r.mu.Lock()
		missing, err := 0, r.err
		for _, k := range wait {
			if !r.seen[k] {
				missing++
			}
		}
		r.mu.Unlock()
		if err != nil {
			r.t.Fatalf("MONITOR: %v", err)
		}
		if missing == 0 {
			break
		}
		select {
		case <-ctx.Done():
			r.t.Fatalf("MONITOR: the marker never came back from %d nodes", missing)
		case <-time.After(5 * time.Millisecond):
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.byURL), maps.Clone(r.robots)
}

// echo sends ECHO msg to the Redis node at addr and reads its answer.
func echo(ctx context.Context, addr, msg string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(conn, "*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(msg), msg); err != nil {
		return err
	}
	br := bufio.NewReader(conn)
	for range 2 { // $len, then the message
		if _, err := br.ReadString('\n'); err != nil {
			return err
		}
	}
	return nil
}

func TestMonitorArgs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`"LPUSH" "crawl:t:{3}:q:h1" "{\"u\":\"http://h1/p3\"}"`, []string{"LPUSH", "crawl:t:{3}:q:h1", `{"u":"http://h1/p3"}`}},
		{`"echo" "a\\b\x01\n"`, []string{"echo", "a\\b\x01\n"}},
		{`"x" y`, nil},
		{`"unterminated\"`, nil},
	} {
		got, err := monitorArgs(tc.in)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s: %q, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("%s: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
