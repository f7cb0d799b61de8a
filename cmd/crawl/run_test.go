package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/simweb"
)

func TestRunUsageErrors(t *testing.T) {
	dir := t.TempDir()
	onlyBad := filepath.Join(dir, "bad.txt")
	os.WriteFile(onlyBad, []byte("# nothing good\nmailto:a@b\nnot a url\n\x00\x01\x02\n"), 0o644)
	good := filepath.Join(dir, "good.txt")
	os.WriteFile(good, []byte("http://127.0.0.1:9/\n"), 0o644)
	cases := []struct {
		name string
		args []string
		want []string // substrings of stderr
	}{
		{"no data", []string{"--seeds", onlyBad}, []string{"--data DIR is required"}},
		{"missing seeds file", []string{"--data", dir, "--seeds", filepath.Join(dir, "nope.txt")}, []string{"nope.txt", "no such file"}},
		{"no valid seed", []string{"--data", dir, "--seeds", onlyBad}, []string{"bad.txt:2:", "bad.txt:3:", "bad.txt:4:", "no valid seed"}},
		{"nothing to resume", []string{"--data", filepath.Join(dir, "empty")}, []string{"no crawl to resume"}},
		{"bad scope", []string{"--data", dir, "--seeds", good, "--scope", "planet"}, []string{"--scope must be host or domain"}},
		{"bad rates", []string{"--data", dir, "--seeds", good, "--min-rate", "5", "--max-rate", "1"}, []string{"--max-rate (1) must not be below --min-rate (5)"}},
		{"bad flag", []string{"--data", dir, "--workers", "many"}, []string{`crawl run: --workers "many": want a whole number`}},
		{"bad regexp", []string{"--data", dir, "--include", "("}, []string{"missing closing )"}},
		{"argument not a URL", []string{"--data", filepath.Join(dir, "new"), "not a url"}, []string{`argument 1: "not a url"`, "(skipped)", "arguments: no valid seed URL"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := runCmd(tc.args, &out, &errb); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
		})
	}
}

func TestUnknownCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch([]string{"fly"}, &out, &errb); code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
}

// waitFetched polls DIR/status.json until the crawl writing it reports a page fetched, for
// at most 30 s, and reports whether it did.
func waitFetched(dir string) bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var st struct{ Fetched int }
		if b, err := os.ReadFile(filepath.Join(dir, "status.json")); err == nil && json.Unmarshal(b, &st) == nil && st.Fetched > 0 {
			return true
		}
	}
	return false
}

// TestSigintExits130ThenResumes interrupts a real crawl process with SIGINT: it must commit
// and exit 130; running it again finishes the crawl.
func TestSigintExits130ThenResumes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns crawl processes")
	}
	web, err := simweb.Start(killWeb(), &simweb.Options{Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	seeds := writeSeeds(t, web.Seeds())
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, out := crawlProcess(ctx, "run", "--seeds", seeds, "--data", dir, "--quiet", "--initial-rate", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once the crawl has fetched something: status.json is written only after the
	// signal handler is in place, so a slow start of the process cannot turn SIGINT into a kill.
	if !waitFetched(dir) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the crawl reported no page fetched within 30s:\n%s", out)
	}
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d after SIGINT, want %d\n%s", code, exitInterrupted, out)
	}
	if !strings.Contains(out.String(), "interrupted") {
		t.Errorf("no interrupted message:\n%s", out)
	}
	cmd, out = crawlProcess(ctx, "run", "--data", dir, "--quiet")
	if err := cmd.Run(); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "crawl done") {
		t.Errorf("resume summary:\n%s", out)
	}
}
