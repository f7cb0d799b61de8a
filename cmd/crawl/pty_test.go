package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// crawlOnTerminal runs the test binary as `crawl ARGS...` with its stdin, stdout and stderr on
// a pseudo-terminal (util-linux script(1), which is on every Debian), and returns what the
// terminal received.
func crawlOnTerminal(t *testing.T, args ...string) (code int, screen string) {
	t.Helper()
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("no script(1) to run crawl on a pseudo-terminal")
	}
	quoted := []string{shellQuote(os.Args[0])}
	for _, a := range args {
		quoted = append(quoted, shellQuote(a))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "-qec", strings.Join(quoted, " "), "/dev/null")
	cmd.Env = append(os.Environ(), "CRAWL_AS_MAIN=1", "COLUMNS=200", "LINES=50")
	out, err := cmd.CombinedOutput()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("script: %v", err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// TestProgressLineOnTerminal: on a terminal, `crawl run` draws a live progress line (rewritten
// in place with \r) and does not log periodic progress records.
func TestProgressLineOnTerminal(t *testing.T) {
	const pages = 8
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int
		if _, err := fmt.Sscanf(r.URL.Path, "/p/%d", &n); err != nil {
			http.NotFound(w, r)
			return
		}
		time.Sleep(300 * time.Millisecond) // the crawl lasts a few seconds: several progress ticks
		w.Header().Set("Content-Type", "text/html")
		if n < pages {
			fmt.Fprintf(w, `<a href="/p/%d">next</a>`, n+1)
		}
	}))
	defer srv.Close()
	code, screen := crawlOnTerminal(t, "run", "--data", t.TempDir(), "--host-concurrency", "1", srv.URL+"/p/1")
	if code != exitOK {
		t.Fatalf("crawl run on a terminal: exit %d\n%s", code, screen)
	}
	if strings.Contains(screen, "msg=progress") {
		t.Errorf("progress log records on a terminal, want a live line:\n%q", screen)
	}
	live := regexp.MustCompile(`\r\x1b\[K\d+s  \d+ pages \(`)
	if n := len(live.FindAllString(screen, -1)); n < 2 {
		t.Errorf("the terminal received %d live progress lines (\\r-rewritten), want at least 2:\n%q", n, screen)
	}
}
