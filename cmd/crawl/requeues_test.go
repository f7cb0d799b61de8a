package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// requeues watches a Redis server's MONITOR stream (which shows the commands scripts run) for
// the LPUSHes that return a URL to the head of its host's queue: a new owner reclaiming the
// URLs in flight when it acquires a partition, or a worker giving a lease back (a request cut
// short, a partition drained or released). No other write puts a URL back at a queue's head;
// new and retried URLs go to its tail (RPUSH). A URL leased once more is fetched once more
// only after such a return, so every duplicate fetch of a URL must be matched by one.
type requeues struct {
	t     testing.TB
	conn  net.Conn
	mu    sync.Mutex
	byURL map[string]int
	seen  map[string]bool // markers seen (sync)
	err   error           // why the stream ended
	done  chan struct{}
}

// watchRequeues starts watching the Redis at addr for crawl's queues; it stops at the test's
// end.
func watchRequeues(t testing.TB, addr, crawl string) *requeues {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("MONITOR: %v", err)
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatalf("MONITOR: %v", err)
	}
	br := bufio.NewReaderSize(conn, 1<<16)
	if line, err := br.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q, %v", line, err)
	}
	r := &requeues{t: t, conn: conn, byURL: map[string]int{}, seen: map[string]bool{}, done: make(chan struct{})}
	prefix := "crawl:" + crawl + ":{"
	go func() {
		defer close(r.done)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
				return
			}
			r.note(line, prefix)
		}
	}()
	t.Cleanup(func() { conn.Close(); <-r.done })
	return r
}

// note records one MONITOR line: an LPUSH to one of the crawl's queues, or a marker.
func (r *requeues) note(line, prefix string) {
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
		r.seen[args[1]] = true
		r.mu.Unlock()
		return
	}
	if len(args) < 3 || !strings.EqualFold(args[0], "lpush") || !strings.HasPrefix(args[1], prefix) || !strings.Contains(args[1], "}:q:") {
		return
	}
	for _, it := range args[2:] {
		var item struct {
			URL string `json:"u"`
		}
		r.mu.Lock()
		if err := json.Unmarshal([]byte(it), &item); err != nil || item.URL == "" {
			r.err = fmt.Errorf("MONITOR: queue item %q: not a URL (%v)", it, err)
		} else {
			r.byURL[item.URL]++
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

// counts waits until the stream has shown every command Redis ran before the call (an ECHO
// of a marker, sent through echo, comes back through MONITOR after them) and returns how many
// times each URL was returned to its queue.
func (r *requeues) counts(ctx context.Context, echo func(ctx context.Context, msg string) error) map[string]int {
	r.t.Helper()
	marker := fmt.Sprintf("requeues-marker-%d", time.Now().UnixNano())
	if err := echo(ctx, marker); err != nil {
		r.t.Fatalf("MONITOR marker: %v", err)
	}
	for {
		r.mu.Lock()
		seen, err := r.seen[marker], r.err
		r.mu.Unlock()
		if err != nil {
			r.t.Fatalf("MONITOR: %v", err)
		}
		if seen {
			break
		}
		select {
		case <-ctx.Done():
			r.t.Fatal("MONITOR: the marker never came back")
		case <-time.After(5 * time.Millisecond):
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.byURL))
	for u, n := range r.byURL {
		out[u] = n
	}
	return out
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
