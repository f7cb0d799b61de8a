//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/simweb"
)

// When the test binary runs as crawl (CRAWL_AS_MAIN=1) with CRAWL_TEST_FSIZE=N, every file it
// writes is capped at N bytes (RLIMIT_FSIZE): growing the store past N fails with EFBIG, as a
// full disk fails with ENOSPC, without root and on any Linux. (Go ignores the SIGXFSZ that
// comes with it.) This runs before TestMain.
func init() {
	if os.Getenv("CRAWL_AS_MAIN") != "1" {
		return
	}
	if v := os.Getenv("CRAWL_TEST_FSIZE"); v != "" {
		var lim syscall.Rlimit
		n, err := strconv.ParseUint(v, 10, 64)
		if err == nil {
			err = syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim)
		}
		if err == nil {
			lim.Cur = min(n, lim.Max)
			err = syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim)
		}
		if err != nil {
			panic("CRAWL_TEST_FSIZE: " + err.Error())
		}
	}
}

func diskWeb() []simweb.HostSpec {
	return []simweb.HostSpec{
		{Name: "a", Pages: 250, Disallow: []string{"/private/"}, CrossLinks: []string{"b"}},
		{Name: "b", Pages: 250},
	}
}

// fillUp runs a crawl that cannot write its store past some point (how is up to env and dir),
// and checks that it stops with exit 1 and a message naming the store and the cause, that the
// store then opens cleanly and passes every consistency check, and that a resumed crawl, once
// there is room again, finishes with every page stored exactly once.
func fillUp(t *testing.T, dir string, env []string, cause string, makeRoom func()) {
	web, err := simweb.Start(diskWeb(), &simweb.Options{Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	seeds := writeSeeds(t, web.Seeds())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"run", "--data", dir, "--quiet", "--initial-rate", "200", "--workers", "8"}

	cmd, out := crawlProcess(ctx, append(args, "--seeds", seeds)...)
	cmd.Env = append(cmd.Env, env...)
	start := time.Now()
	err = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != exitRuntime {
		t.Fatalf("exit %d (%v) when the store cannot grow, want %d:\n%s", code, err, exitRuntime, out)
	}
	msg := out.String()
	t.Logf("stopped after %v:\n%s", time.Since(start).Round(time.Millisecond), lastLines(msg, 3))
	store := filepath.Join(dir, "crawl.db")
	if !strings.Contains(msg, store) || !strings.Contains(msg, cause) {
		t.Errorf("the message does not name the store %s and the cause %q:\n%s", store, cause, msg)
	}
	pages, _ := inspectStore(t, dir, "after the failed crawl")
	if len(pages) == 0 {
		t.Errorf("nothing was stored before the store filled up; the test proves little")
	}
	for u, n := range pages {
		if n != 1 {
			t.Errorf("%s stored %d times", u, n)
		}
	}

	makeRoom()
	cmd, out = crawlProcess(ctx, args...)
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "crawl done") {
		t.Fatalf("resume with room again: %v\n%s", err, out)
	}
	pages, counts := inspectStore(t, dir, "after the resumed crawl")
	checkEachOnce(t, web, pages)
	if counts.Queued != 0 {
		t.Errorf("%d URLs still queued, want 0", counts.Queued)
	}
}

// TestStoreCannotGrow: the store file may not grow past 256 KiB (RLIMIT_FSIZE), about a fifth
// of what the crawl needs.
func TestStoreCannotGrow(t *testing.T) {
	t.Parallel() // its own store and processes (a file-size limit is set in the child only)
	if testing.Short() {
		t.Skip("spawns crawl processes")
	}
	fillUp(t, t.TempDir(), []string{"CRAWL_TEST_FSIZE=262144"}, "file too large", func() {})
}

// TestDiskFull: the data directory is a 1 MiB tmpfs, so writes fail with ENOSPC; then it is
// remounted bigger and the crawl resumes. Needs root (mount); skipped otherwise.
func TestDiskFull(t *testing.T) {
	t.Parallel() // its own store, processes and tmpfs
	if testing.Short() {
		t.Skip("spawns crawl processes")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs to fill up (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	fillUp(t, dir, nil, "no space left on device", func() {
		if out, err := exec.Command("mount", "-o", "remount,size=64m", dir).CombinedOutput(); err != nil {
			t.Fatalf("remount: %v %s", err, out)
		}
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
