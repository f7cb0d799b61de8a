package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// crawlCmd runs the test binary as `crawl ARGS...` with stdin, and returns its exit code,
// stdout and stderr. Every message crawl prints is checked for internal package names.
func crawlCmd(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "CRAWL_AS_MAIN=1")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("crawl %q: %v", args, err)
	}
	checkNoPackageNames(t, errb.String())
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// checkNoPackageNames fails t if a message names one of crawl's packages ("storage: open …")
// rather than a command ("crawl export: …").
func checkNoPackageNames(t *testing.T, msg string) {
	t.Helper()
	for _, loc := range packagePrefix.FindAllStringIndex(msg, -1) {
		if !strings.HasSuffix(msg[:loc[0]], "crawl ") {
			t.Errorf("a message names an internal package (%q):\n%s", msg[loc[0]:loc[1]], msg)
		}
	}
}

// crawlIn runs `crawl ARGS...` in the test's own process (dispatch, as main does), for
// commands that only print: a race-built binary costs about a second to start on a loaded
// machine. It returns the exit code, stdout and stderr, each message checked as crawlCmd's.
func crawlIn(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = dispatch(args, &out, &errb)
	checkNoPackageNames(t, errb.String())
	return code, out.String(), errb.String()
}

// TestHelpAndVersion: `crawl help CMD`, `crawl CMD -h` and `--help` print CMD's help on stdout
// and exit 0; `crawl version` names the Go version. One of each runs as its own process, the
// rest in the test's (crawlIn): the same code, from dispatch on.
func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"run", "urls", "status", "demo", "report", "robots", "export"} {
		var first string
		for _, args := range [][]string{{"help", cmd}, {cmd, "-h"}, {cmd, "--help"}} {
			code, out, errOut := crawlIn(t, args...)
			if code != exitOK || !strings.HasPrefix(out, "usage: crawl "+cmd) || !strings.Contains(out, "\nflags:\n  -") || errOut != "" {
				t.Errorf("crawl %q: exit %d, stdout:\n%s\nstderr: %s", args, code, out, errOut)
			}
			if first == "" {
				first = out
			} else if out != first {
				t.Errorf("crawl %q prints another help than crawl help %s", args, cmd)
			}
		}
	}
	if code, out, errOut := crawlCmd(t, "", "run", "--help"); code != exitOK || !strings.HasPrefix(out, "usage: crawl run") ||
		!strings.Contains(out, "-max-body") || !strings.Contains(out, "-robots-agent") || errOut != "" {
		t.Errorf("crawl run --help as a process: exit %d, stdout:\n%s\nstderr: %s; want run's flags", code, out, errOut)
	}
	if code, out, _ := crawlIn(t, "--help"); code != exitOK || !strings.Contains(out, "commands:") {
		t.Errorf("crawl --help: exit %d\n%s", code, out)
	}
	if code, _, errOut := crawlIn(t, "help", "fly"); code != exitUsage || !strings.Contains(errOut, `unknown command "fly"`) {
		t.Errorf("crawl help fly: exit %d, %s", code, errOut)
	}
	code, out, _ := crawlCmd(t, "", "version")
	if code != exitOK || !strings.HasPrefix(out, "crawl ") || !strings.Contains(out, runtime.Version()) || strings.Count(out, "\n") != 1 {
		t.Errorf("crawl version: exit %d, %q; want one line naming %s", code, out, runtime.Version())
	}
}

// TestBadFlagOneLine: a bad flag value or an unknown flag is one line on stderr that names the
// flag and the form it takes, with exit 2, for every command.
func TestBadFlagOneLine(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--data", dir, "--timeout", "soon"}, `crawl run: --timeout "soon": want a duration such as 30s, 5m or 1h30m (a bare number is seconds)`},
		{[]string{"run", "--data", dir, "--max-body", "ten"}, `crawl run: --max-body "ten": want a positive number of bytes, e.g. 10485760, 10M or 10MB`},
		{[]string{"run", "--data", dir, "--max-rate", "fast"}, `crawl run: --max-rate "fast": want a number`},
		{[]string{"run", "--data", dir, "--quiet=maybe"}, `crawl run: --quiet "maybe": want true or false`},
		{[]string{"run", "--data", dir, "--max-time"}, `crawl run: --max-time needs a value: want a duration`},
		{[]string{"status", "--data", dir, "--hosts", "many"}, `crawl status: --hosts "many": want a whole number`},
		{[]string{"urls", "--frobnicate"}, `crawl urls: unknown flag --frobnicate (crawl help urls lists the flags)`},
		{[]string{"export", "--data", dir, "--bogus", "1"}, `crawl export: unknown flag --bogus`},
		{[]string{"demo", "--workers", "-"}, `crawl demo: --workers "-": want a whole number`},
		{[]string{"report", "--width", "wide"}, `crawl report: --width "wide": want a whole number`},
		{[]string{"robots", "--agent"}, `crawl robots: --agent needs a value`},
	} {
		code, out, errOut := crawlCmd(t, "", tc.args...)
		if code != exitUsage || out != "" || !strings.HasPrefix(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("crawl %q: exit %d, stdout %q, stderr:\n%s\nwant exit 2 and one line starting %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestSeedsFromArgumentsAndStdin: seeds given as arguments (flags before and after them), on
// stdin with --seeds -, and as a bare host name, which is crawled as https:// with a notice.
// Units are accepted: --timeout 5 is 5 s, --max-body 1MB is 1 MiB.
func TestSeedsFromArgumentsAndStdin(t *testing.T) {
	t.Parallel()
	a, b := tinySite(t), tinySite(t)
	tlsSite := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<title>tls</title>"))
	}))
	defer tlsSite.Close()
	bare := strings.TrimPrefix(tlsSite.URL, "https://") + "/"

	dir := filepath.Join(t.TempDir(), "data")
	code, out, errOut := crawlCmd(t, b+"/\n", "run", a+"/", "--data", dir, "--quiet", "--seeds", "-", "--timeout", "5", bare, "--max-body", "1MB", "--insecure")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if want := "argument 2: no scheme: crawling https://" + bare; !strings.Contains(errOut, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut)
	}
	for _, u := range []string{a + "/", b + "/", "https://" + bare} {
		if st := urlState(t, dir, u); st.State != "fetched" {
			t.Errorf("%s: %+v, want fetched", u, st)
		}
	}
	st := statusJSON(t, dir)
	if st.Settings == nil || st.Settings.Timeout != 5*time.Second || st.Settings.MaxBody != 1<<20 {
		t.Errorf("stored settings %+v, want timeout 5s and max-body 1048576", st.Settings)
	}

	// Arguments that are not URLs are reported by position; with none valid, exit 2.
	code, _, errOut = crawlCmd(t, "", "run", "--data", filepath.Join(t.TempDir(), "d"), "ftp://example.com/x", "--quiet")
	if code != exitUsage || !strings.Contains(errOut, `argument 1: "ftp://example.com/x": unsupported scheme "ftp" (skipped)`) || !strings.Contains(errOut, "arguments: no valid seed URL") {
		t.Errorf("an ftp seed: exit %d\n%s", code, errOut)
	}
	code, _, errOut = crawlCmd(t, "# nothing\n", "run", "--data", filepath.Join(t.TempDir(), "d"), "--seeds", "-")
	if code != exitUsage || !strings.Contains(errOut, "stdin: no valid seed URL") {
		t.Errorf("an empty stdin: exit %d\n%s", code, errOut)
	}
}

// TestRobotsProductToken: the robots.txt product token is the product a browser-like user
// agent names after "compatible;", and --robots-agent overrides it (and is kept for resumes).
func TestRobotsProductToken(t *testing.T) {
	t.Parallel()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: MyBot\nDisallow: /\n\nUser-agent: *\nAllow: /\n")
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<title>page</title>"))
	}))
	defer site.Close()
	ua := "Mozilla/5.0 (compatible; MyBot/1.0; +https://example.com/bot)"

	dir := t.TempDir()
	code, _, errOut := crawlCmd(t, "", "run", site.URL+"/", "--data", dir, "--quiet", "--user-agent", ua)
	if st := urlState(t, dir, site.URL+"/"); code != exitRuntime || st.State != "excluded" || st.Reason != "robots" {
		t.Errorf("as %q: exit %d, seed %+v; want it excluded by the MyBot group\n%s", ua, code, st, errOut)
	}
	dir = t.TempDir()
	code, _, errOut = crawlCmd(t, "", "run", site.URL+"/", "--data", dir, "--quiet", "--user-agent", ua, "--robots-agent", "OtherBot")
	if st := urlState(t, dir, site.URL+"/"); code != exitOK || st.State != "fetched" {
		t.Errorf("--robots-agent OtherBot: exit %d, seed %+v; want it fetched under User-agent: *\n%s", code, st, errOut)
	}
	if st := statusJSON(t, dir); st.Settings == nil || st.Settings.RobotsAgent != "OtherBot" {
		t.Errorf("stored settings %+v, want robots-agent OtherBot", st.Settings)
	}
}
