package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/internal/storetest"
	"github.com/crawl-project/crawl/storage"
)

// Bounds on one command run on a damaged store: its time, and the resident memory of the
// process running it.
const (
	damagedCmdTime = 30 * time.Second
	damagedCmdRSS  = 1 << 30
)

// TestRandomDamageEveryCommand: copies of a finished crawl's store and of one with URLs still
// queued, each damaged in one way drawn at random (random bytes, a bit flipped, a range zeroed,
// the file cut short, a page pointing to itself, a byte of the root bucket's page, an overflow
// count), and every command run on each copy: urls, status, export in each format, check,
// report, run --learned-from, salvage, run and the library's crawler.New and Run. Each ends
// within damagedCmdTime and damagedCmdRSS with exit 0, or exit 1 naming the store file as
// damaged; never a panic or a fatal error. A store salvaged from one passes crawl check and
// crawl run resumes it. CRAWL_DAMAGE_SEEDS=N widens it (N seeds of each kind; 1 by default).
func TestRandomDamageEveryCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns crawl processes")
	}
	seeds := 1
	if s := os.Getenv("CRAWL_DAMAGE_SEEDS"); s != "" {
		var err error
		if seeds, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 150}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	stores := map[string]string{
		"finished": crawlSite(t, web),
		"queued":   crawlSite(t, web, "--max-pages", "40"),
	}
	seedFile := writeSeeds(t, web.Seeds())
	t.Run("copies", func(t *testing.T) { // the web is closed only when they are all done
		damageEveryCommand(t, stores, seedFile, seeds)
	})
}

// damageEveryCommand runs TestRandomDamageEveryCommand's subtests on copies of stores.
func damageEveryCommand(t *testing.T, stores map[string]string, seedFile string, seeds int) {
	kinds := []struct {
		name string
		do   func(f *storetest.File, rng *rand.Rand) bool
	}{
		{"200 random bytes", func(f *storetest.File, rng *rand.Rand) bool { f.RandomBytes(rng, 200); return true }},
		{"2000 random bytes", func(f *storetest.File, rng *rand.Rand) bool { f.RandomBytes(rng, 2000); return true }},
		{"20000 random bytes", func(f *storetest.File, rng *rand.Rand) bool { f.RandomBytes(rng, 20000); return true }},
		{"a bit flipped in a page in use", func(f *storetest.File, rng *rand.Rand) bool { f.FlipBit(rng, true); return true }},
		{"a range zeroed", func(f *storetest.File, rng *rand.Rand) bool { f.Zero(rng, 64<<10); return true }},
		{"cut short", func(f *storetest.File, rng *rand.Rand) bool { f.Truncate(rng); return true }},
		{"a page pointing to itself", func(f *storetest.File, rng *rand.Rand) bool { return f.SelfLoop(rng) }},
		{"a byte of the root bucket's page", func(f *storetest.File, rng *rand.Rand) bool { f.RootByte(rng); return true }},
		{"an overflow count of 2^32-1", func(f *storetest.File, rng *rand.Rand) bool { f.Overflow(rng, 1<<32-1); return true }},
	}
	for _, store := range []string{"finished", "queued"} {
		good, err := os.ReadFile(filepath.Join(stores[store], storage.FileName))
		if err != nil {
			t.Fatal(err)
		}
		for _, kind := range kinds {
			for seed := range uint64(seeds) {
				t.Run(fmt.Sprintf("%s/%s/seed %d", store, kind.name, seed), func(t *testing.T) {
					t.Parallel()
					f, err := storetest.ReadFile(bytes.Clone(good))
					if err != nil {
						t.Fatal(err)
					}
					if !kind.do(f, rand.New(rand.NewPCG(seed, 45))) {
						t.Skip("no such page")
					}
					dir := filepath.Join(t.TempDir(), "data")
					os.Mkdir(dir, 0o755)
					if err := os.WriteFile(filepath.Join(dir, storage.FileName), f.Data, 0o644); err != nil {
						t.Fatal(err)
					}
					runDamaged(t, dir, seedFile)
				})
			}
		}
	}
}

// runDamaged runs every command on the damaged store in dir, in one process, and checks how
// each ends.
func runDamaged(t *testing.T, dir, seedFile string) {
	path := filepath.Join(dir, storage.FileName)
	tmp := t.TempDir()
	salvaged := filepath.Join(tmp, "salvaged")
	script := [][]string{
		{"urls", "--data", dir},
		{"status", "--data", dir},
		{"check", "--data", dir},
		{"report", "--data", dir, "--out", filepath.Join(tmp, "report.html")},
		{"run", "--seeds", seedFile, "--data", filepath.Join(tmp, "learner"), "--quiet", "--max-pages", "1", "--learned-from", dir},
		{"salvage", "--data", dir, "--to", salvaged},
	}
	for _, format := range []string{"warc", "jsonl", "csv", "mirror"} {
		script = append(script, []string{"export", "--data", dir, "--format", format, "--out", filepath.Join(tmp, "out."+format)})
	}
	script = append(script, []string{"run", "--data", dir, "--quiet", "--max-pages", "150"}, []string{"@library", dir})
	salvage := 5
	after := len(script)
	script = append(script, []string{"check", "--data", salvaged}, []string{"run", "--data", salvaged, "--quiet", "--max-pages", "150", "--initial-rate", "1000"}) // its settings may be lost

	results := runScript(t, script)
	if os.Getenv("CRAWL_DAMAGE_VERBOSE") != "" {
		for i, r := range results {
			t.Logf("crawl %s: exit %d\n%s", script[i][0], r.code, r.out)
		}
	}
	for i, r := range results[:after] {
		bad := strings.Contains(r.out, "panic:") || strings.Contains(r.out, "fatal error") || strings.Contains(r.out, "goroutine ") ||
			strings.ContainsAny(r.out, "\x00\x1b") // bytes of the store reach the terminal escaped
		if bad || (r.code != exitOK && (r.code != exitRuntime || !strings.Contains(r.out, path) || !strings.Contains(r.out, "damaged"))) {
			t.Errorf("crawl %s: exit %d; want %d, or %d naming %s as damaged, no panic and no raw control bytes:\n%s", strings.Join(script[i], " "), r.code, exitOK, exitRuntime, path, r.out)
		}
	}
	if results[salvage].code != exitOK {
		return
	}
	if r := results[after]; r.code != exitOK {
		t.Errorf("crawl check on the store salvaged from the damaged one: exit %d\n%s\n(salvage said:\n%s)", r.code, r.out, results[salvage].out)
	}
	// The salvaged crawl resumes: it runs without finding damage. What the salvage lost may
	// leave it nothing to do (exit 2: no URL queued) or nothing it may fetch (exit 1: a lost
	// scope record leaves its URLs out of scope), which it says.
	r := results[after+1]
	if r.code != exitOK && strings.Contains(results[salvage].out, "resumes the crawl") &&
		(strings.Contains(r.out, "damaged") || !strings.Contains(r.out, "nothing was fetched")) {
		t.Errorf("crawl run on the store salvaged from the damaged one: exit %d\n%s\n(salvage said:\n%s)", r.code, r.out, results[salvage].out)
	}
}

// scriptResult is how one command of a script ended.
type scriptResult struct {
	code int
	out  string
}

// runScript runs the commands of script one after the other in one crawl process (see
// runScriptMain), killing it when one of them runs longer than damagedCmdTime or the process
// holds more than damagedCmdRSS, and returns how each ended. A command that crashed the
// process fails t.
func runScript(t *testing.T, script [][]string) []scriptResult {
	t.Helper()
	js, _ := json.Marshal(script)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "CRAWL_SCRIPT="+string(js))
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var mu sync.Mutex
	var results []scriptResult
	var cur strings.Builder
	started := time.Now()
	running := -1
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			switch {
			case strings.HasPrefix(line, scriptStart):
				running, started = len(results), time.Now()
				cur.Reset()
			case strings.HasPrefix(line, scriptEnd):
				code, _ := strconv.Atoi(strings.TrimPrefix(line, scriptEnd))
				results = append(results, scriptResult{code: code, out: cur.String()})
				running = -1
			default:
				cur.WriteString(line + "\n")
			}
			mu.Unlock()
		}
	}()
	var killed string
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-tick.C:
			mu.Lock()
			i, since := running, time.Since(started)
			mu.Unlock()
			if rss := processRSS(cmd.Process.Pid); rss > damagedCmdRSS || (i >= 0 && since > damagedCmdTime) {
				killed = fmt.Sprintf("killed after %v holding %d MiB", since.Round(time.Second), rss>>20)
				cmd.Process.Kill()
			}
		}
	}
	werr := cmd.Wait()
	if len(results) < len(script) {
		i := len(results)
		t.Fatalf("crawl %s did not end (%s; %v):\n%s", strings.Join(script[i], " "), killed, werr, lastLines(cur.String(), 60))
	}
	return results
}

// processRSS is the resident memory of process pid in bytes, 0 if it cannot be read.
func processRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// The lines runScriptMain writes around each command's output.
const (
	scriptStart = "\x1e=== start"
	scriptEnd   = "\x1e=== exit "
)

// runScriptMain runs the commands of the JSON script (as runScript passes it), writing each
// one's output between a start line and its exit code. "@library DIR" runs a crawl of DIR
// through the library (crawler.New, then Run).
func runScriptMain(js string) int {
	var script [][]string
	if err := json.Unmarshal([]byte(js), &script); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitUsage
	}
	for _, args := range script {
		fmt.Fprintf(os.Stdout, "\n%s\n", scriptStart)
		var code int
		if args[0] == "@library" {
			code = runLibrary(args[1], os.Stdout)
		} else {
			code = dispatch(args, os.Stdout, os.Stdout)
		}
		fmt.Fprintf(os.Stdout, "\n%s%d\n", scriptEnd, code)
	}
	return exitOK
}

// runLibrary resumes the crawl in dir through the library, as a program using it would.
func runLibrary(dir string, w io.Writer) int {
	c, err := crawler.New(crawler.Options{DataDir: dir})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), damagedCmdTime)
		defer cancel()
		err = c.Run(ctx)
	}
	if err != nil {
		fmt.Fprintf(w, "crawler: %v (damaged: %v)\n", err, errors.Is(err, storage.ErrDamaged))
		return exitRuntime
	}
	return exitOK
}
