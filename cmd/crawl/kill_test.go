package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/simweb"
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

// The SIGKILL test that lived here is now TestChaos (chaos_test.go); these helpers remain.

// killWeb is big enough that a crawl takes a few seconds, so signals land mid-crawl.
func killWeb() []simweb.HostSpec {
	return []simweb.HostSpec{
		{Name: "a", Pages: 120, Limit: 80, Burst: 4, Disallow: []string{"/private/"}, CrossLinks: []string{"b"}},
		{Name: "b", Pages: 120, Limit: 60, Burst: 2, Reply: simweb.Reply429Date},
		{Name: "c", Pages: 90, Workers: 4, Service: 5 * time.Millisecond},
	}
}

// checkEachOnce fails the test unless pages (2xx pages stored, by URL) holds every page the
// simulated web expects exactly once, and nothing else. It returns how many pages it expects.
func checkEachOnce(t *testing.T, web *simweb.Web, pages map[string]int) (want int) {
	t.Helper()
	for _, urls := range web.Expected() {
		want += len(urls)
		for _, u := range urls {
			if pages[u] != 1 {
				t.Errorf("%s stored %d times, want exactly 1", u, pages[u])
			}
		}
	}
	if len(pages) != want {
		t.Errorf("store holds %d distinct 2xx pages, want %d", len(pages), want)
	}
	return want
}
