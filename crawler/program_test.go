package crawler_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
)

// buildProgram builds testdata/program, a module of its own that requires this checkout
// through a replace, as a Go user's program would.
func buildProgram(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file)) // the checkout
	src := t.TempDir()
	for _, name := range []string{"main.go", "go.sum"} {
		b, err := os.ReadFile(filepath.Join("testdata", "program", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mod, err := os.ReadFile(filepath.Join("testdata", "program", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod = []byte(strings.Replace(string(mod), "=> ../../..", "=> "+root, 1))
	if err := os.WriteFile(filepath.Join(src, "go.mod"), mod, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "program")
	cmd := exec.Command("go", "build", "-mod=mod", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the program: %v\n%s", err, out)
	}
	return bin
}

// TestProgramKilledResumes builds the package doc's program in its own module, kills it with
// SIGKILL partway through a crawl of hosts with hidden limits (three of the politeness web's),
// and runs it again on the same directory: the store ends complete, no page is printed twice,
// at most 1% of the requests were refused, and no host banned the crawler. (A Retry-After
// pause under 2 s is not saved, so the run after a kill may send inside one: not checked.)
func TestProgramKilledResumes(t *testing.T) {
	t.Parallel()
	bin := buildProgram(t)
	var specs []simweb.HostSpec
	for _, s := range simweb.PolitenessBench() {
		switch s.Name {
		case "sec429", "burst", "free1":
			s.CrossLinks = nil
			specs = append(specs, s)
		}
	}
	web, err := simweb.Start(specs, &simweb.Options{Seed: 11, Grace: 50 * time.Millisecond, KernelArrival: true})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := filepath.Join(t.TempDir(), "data")

	var mu sync.Mutex
	printed := map[string]int{}
	run := func(killAfter int, seeds []string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		args := append([]string{"-data", dir}, seeds...)
		cmd := exec.CommandContext(ctx, bin, args...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		n := 0
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 && f[1] == "200" {
				mu.Lock()
				printed[f[0]]++
				mu.Unlock()
			}
			if n++; killAfter > 0 && n == killAfter {
				cmd.Process.Kill()
			}
		}
		err = cmd.Wait()
		if killAfter == 0 && err != nil {
			t.Fatalf("program: %v\n%s", err, stderr.String())
		}
	}
	run(300, web.Seeds())
	killedAt := len(printed)
	run(0, nil)
	t.Logf("printed %d pages before the kill, %d in all", killedAt, len(printed))

	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stored := map[string]int{}
	if err := db.PagesMeta(func(p *storage.Page) error {
		if p.Status == 200 {
			stored[p.URL]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	missing := 0
	for host, urls := range web.Expected() {
		for _, u := range urls {
			if stored[u] != 1 {
				t.Errorf("host %s: %s stored %d times, want 1", host, u, stored[u])
			}
			switch printed[u] {
			case 0:
				missing++ // stored just before the kill, not yet printed
			case 1:
			default:
				t.Errorf("%s printed %d times", u, printed[u])
			}
		}
	}
	if missing > 8 { // at most the requests in flight at the kill
		t.Errorf("%d stored pages never printed", missing)
	}
	requests, over := 0, 0
	for name, s := range web.Stats() {
		requests += s.Requests
		over += s.OverLimit
		if s.Banned || s.RobotsViolations > 0 {
			t.Errorf("host %s: banned %v, %d robots violations", name, s.Banned, s.RobotsViolations)
		}
	}
	t.Logf("%d of %d requests refused (%.2f%%)", over, requests, 100*float64(over)/float64(requests))
	if over*100 > requests {
		t.Errorf("%d of %d requests refused: more than 1%%", over, requests)
	}
}
