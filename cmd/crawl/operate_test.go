package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/simweb"
)

// Operating a running shared crawl from outside its workers: crawl add queues a seed of a host
// out of the crawl's scope while a worker runs, crawl urls --redis lists it, the running worker
// crawls that host whole (the scope widened), and crawl status --data of the worker's store
// names the shared crawl it served.
func TestFleetAddURLsStatus(t *testing.T) {
	t.Parallel()
	specs := []simweb.HostSpec{
		{Name: "first", Pages: 30, Service: 30 * time.Millisecond},
		{Name: "late", Pages: 8},
	}
	f := newFleet(t, specs, steadyLease, "--initial-rate", "5")
	first, late := f.web.URL("first"), f.web.URL("late")
	if err := os.WriteFile(f.seeds, []byte(first+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	redisURL := f.srv.URL()

	// before any worker: no such crawl
	if code, _, errOut := crawlCmd(t, "", "add", "--redis", redisURL, "--crawl", "t", late); code != exitRuntime || !strings.Contains(errOut, `no crawl "t"`) {
		t.Errorf("crawl add before the crawl exists: exit %d, %q; want %d naming the crawl", code, errOut, exitRuntime)
	}
	w := f.start("")
	f.waitServed(3)
	code, out, errOut := crawlCmd(t, "", "add", "--redis", redisURL, "--crawl", "t", late, first)
	if code != exitOK || !strings.Contains(out, "2 seeds sent") {
		t.Fatalf("crawl add: exit %d, %q %q; want 0 and two seeds sent", code, out, errOut)
	}
	lateHost := strings.TrimPrefix(late, "http://")
	lateHost = strings.TrimSuffix(lateHost, "/")
	code, out, errOut = crawlCmd(t, "", "urls", "--redis", redisURL, "--crawl", "t", "--host", lateHost, "--json")
	if code != exitOK {
		t.Fatalf("crawl urls --redis: exit %d, %q", code, errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue // already taken by the worker
		}
		var l sharedURLLine
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.State != "queued" || !strings.HasPrefix(l.URL, late) {
			t.Errorf("crawl urls --redis --host %s: line %q (%v); want queued URLs of that host only", lateHost, line, err)
		}
	}
	if code, _, errOut := crawlCmd(t, "", "urls", "--redis", redisURL, "--crawl", "t", "--state", "fetched"); code != exitUsage || !strings.Contains(errOut, "fingerprints") {
		t.Errorf("crawl urls --redis --state fetched: exit %d, %q; want %d saying Redis keeps fingerprints only", code, errOut, exitUsage)
	}
	f.finish(w)
	f.checkComplete(0) // the late host's pages too: its links were in scope for the running worker
	f.idleInRedis()

	code, out, errOut = crawlCmd(t, "", "status", "--data", w.dir)
	if code != exitOK || !strings.Contains(out, `shared crawl "t" at `+redisURL) || strings.Contains(out, "fetched 0") {
		t.Errorf("crawl status --data of a worker's store: exit %d, %q %q; want the shared crawl named, no zero counts", code, out, errOut)
	}
	code, out, _ = crawlCmd(t, "", "status", "--data", w.dir, "--json")
	var st struct {
		Shared *struct{ Redis, Crawl string } `json:"shared"`
	}
	if err := json.Unmarshal([]byte(out), &st); code != exitOK || err != nil || st.Shared == nil || st.Shared.Crawl != "t" || st.Shared.Redis != redisURL {
		t.Errorf("crawl status --data --json: exit %d, %v, shared %+v; want crawl t at %s", code, err, st.Shared, redisURL)
	}
}

// crawl add's usage errors and a Redis that cannot be reached: exit 2 with a clear message.
func TestAddBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "http://a.example/"}, "usage: crawl add"},
		{[]string{"add", "--redis", "redis://127.0.0.1:1/0"}, "usage: crawl add"},
		{[]string{"add", "--redis", "redis://127.0.0.1:1/0", "http://a.example/"}, "127.0.0.1:1 unreachable"},
		{[]string{"add", "--redis", "mysql://x", "http://a.example/"}, "--redis"},
		{[]string{"urls", "--redis", "redis://127.0.0.1:1/0", "--data", "x"}, "usage: crawl urls"},
	} {
		code, _, errOut := crawlCmd(t, "", tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("crawl %q: exit %d, %q; want %d and %q", tc.args, code, errOut, exitUsage, tc.want)
		}
	}
}

func TestRedactedRedis(t *testing.T) {
	for in, want := range map[string]string{
		"redis://127.0.0.1:6379/0":                "redis://127.0.0.1:6379/0",
		"redis://:secret@10.0.0.1:6379/2":         "redis://10.0.0.1:6379/2",
		"rediss://user:secret@r.example:6380/0":   "rediss://user@r.example:6380/0",
		"redis://r.example/0?password=secret&x=1": "redis://r.example/0",
	} {
		if got := redactedRedis(in); got != want {
			t.Errorf("redactedRedis(%q) = %q, want %q", in, got, want)
		}
	}
}
