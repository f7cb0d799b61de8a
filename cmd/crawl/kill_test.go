package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
)

// crawlProcess starts the test binary as `crawl ARGS...`.
func crawlProcess(ctx context.Context, args ...string) (*exec.Cmd, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "CRAWL_AS_MAIN=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	return cmd, &out
}

func writeSeeds(t *testing.T, urls []string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "seeds.txt")
	if err := os.WriteFile(f, []byte("# test seeds\n"+strings.Join(urls, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// killWeb is big enough that a crawl takes a few seconds, so kills land mid-crawl.
func killWeb() []simweb.HostSpec {
	return []simweb.HostSpec{
		{Name: "a", Pages: 120, Limit: 80, Burst: 4, Disallow: []string{"/private/"}, CrossLinks: []string{"b"}},
		{Name: "b", Pages: 120, Limit: 60, Burst: 2, Reply: simweb.Reply429Date},
		{Name: "c", Pages: 90, Workers: 4, Service: 5 * time.Millisecond},
	}
}

// TestKill9AnyMomentLosesNothing runs real `crawl run` processes on the simulated web and kills
// each with SIGKILL at a random moment, resuming every time; the final store must hold every
// reachable allowed page exactly once, and the servers may have seen at most the in-flight
// requests at each kill fetched twice.
func TestKill9AnyMomentLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns crawl processes")
	}
	seed := time.Now().UnixNano()
	rnd := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	web, err := simweb.Start(killWeb(), &simweb.Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	seeds := writeSeeds(t, web.Seeds())
	dir := t.TempDir()
	const kills, workers = 6, 8
	args := []string{"run", "--data", dir, "--quiet", "--initial-rate", "20", "--workers", fmt.Sprint(workers)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := 0; i < kills; i++ {
		a := args
		if i == 0 {
			a = append(a, "--seeds", seeds)
		}
		cmd, out := crawlProcess(ctx, a...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(150+rnd.Intn(600)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if cmd.ProcessState.ExitCode() == 0 {
			t.Logf("run %d finished before its kill", i)
		} else if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("run %d: %v\n%s", i, err, out)
		}
	}
	cmd, out := crawlProcess(ctx, args...)
	if err := cmd.Run(); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	t.Logf("final run:\n%s", out)

	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	err = db.PagesMeta(func(p *storage.Page) error {
		if p.Status == 200 {
			got[p.URL]++
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, urls := range web.Expected() {
		want += len(urls)
		for _, u := range urls {
			if got[u] != 1 {
				t.Errorf("%s stored %d times, want exactly 1", u, got[u])
			}
		}
	}
	if len(got) != want {
		t.Errorf("store has %d pages, want %d", len(got), want)
	}
	dups := 0
	for name, s := range web.Stats() {
		dups += s.Duplicates
		if s.RobotsViolations > 0 {
			t.Errorf("host %s: %d robots violations", name, s.RobotsViolations)
		}
	}
	if dups > kills*workers {
		t.Errorf("servers saw %d duplicate fetches; at most %d were in flight at the kills", dups, kills*workers)
	}
	t.Logf("%d pages, %d fetched twice across %d kills", want, dups, kills)

	// status agrees with the store and the servers.
	var so bytes.Buffer
	if code := statusCmd([]string{"--data", dir, "--json"}, &so, os.Stderr); code != 0 {
		t.Fatalf("status exit %d", code)
	}
	var st crawler.Status
	if err := json.Unmarshal(so.Bytes(), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, so.String())
	}
	if st.Queued != 0 || st.InFlight != 0 || st.Fetched < want {
		t.Errorf("status: queued %d in flight %d fetched %d; want 0, 0, >= %d", st.Queued, st.InFlight, st.Fetched, want)
	}
}
