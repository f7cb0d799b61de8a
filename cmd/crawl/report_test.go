package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
)

// TestRunMetricsAndReport crawls the small simulated web with --metrics-addr and JSON logs,
// then makes the report of it with `crawl report`.
func TestRunMetricsAndReport(t *testing.T) {
	t.Parallel()
	web, err := simweb.Start(simweb.Small(), &simweb.Options{Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := t.TempDir()
	seeds := filepath.Join(dir, "seeds.txt")
	os.WriteFile(seeds, []byte(strings.Join(web.Seeds(), "\n")), 0o644)
	data := filepath.Join(dir, "data")

	var out, errb bytes.Buffer
	code := runCmd([]string{"--seeds", seeds, "--data", data, "--initial-rate", "50",
		"--metrics-addr", "127.0.0.1:0", "--log-format", "json"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, errb.String())
	}
	var sawMetrics, sawProgress bool
	for _, line := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("stderr line is not JSON: %q", line)
			continue
		}
		switch rec["msg"] {
		case "serving metrics":
			sawMetrics = strings.HasPrefix(rec["url"].(string), "http://127.0.0.1:")
		case "progress":
			sawProgress = rec["fetched"] != nil && rec["retries"] != nil && rec["hosts_paused"] != nil
		}
	}
	if !sawMetrics || !sawProgress {
		t.Errorf("stderr lacks the metrics URL or a progress record:\n%s", errb.String())
	}

	out.Reset()
	errb.Reset()
	html := filepath.Join(dir, "r.html")
	if code := reportCmd([]string{"--data", data, "--out", html}, &out, &errb); code != exitOK {
		t.Fatalf("report: exit %d\n%s", code, errb.String())
	}
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("<svg")); n != 3+2*3 {
		t.Errorf("report has %d charts, want 9 (3 crawl-wide, 2 for each of 3 hosts)", n)
	}
	if !strings.Contains(out.String(), "report: "+html) {
		t.Errorf("stdout %q does not name the report", out.String())
	}
}

func TestReportUsage(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no data", nil, exitUsage, "usage: crawl report"},
		{"stray argument", []string{"--data", dir, "x"}, exitUsage, "usage: crawl report"},
		{"tiny screenshot", []string{"--data", dir, "--png", "x.png", "--width", "10"}, exitUsage, "at least 200"},
		{"not a crawl", []string{"--data", dir}, exitRuntime, "not a crawl data directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := reportCmd(tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errb.String(), tc.code, tc.want)
			}
		})
	}
	var out, errb bytes.Buffer
	if code := runCmd([]string{"--data", dir, "--seeds", "x", "--log-format", "xml"}, &out, &errb); code != exitUsage {
		t.Errorf("--log-format xml: exit %d, want %d", code, exitUsage)
	}
}

// TestProgressOffTerminal: off a terminal, progress is a log record every progressEvery (and
// at the end), not a live line.
func TestProgressOffTerminal(t *testing.T) {
	var buf bytes.Buffer
	o := &outputOptions{logFormat: "text"}
	cfg := crawler.Defaults()
	w, err := o.watch(&cfg, &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	st := crawler.Status{Running: true, Fetched: 10, Queued: 5, Run: &crawler.RunCounters{OverLimit: 2, Retries: 3},
		Hosts: []crawler.HostStatus{{Host: "a", Queued: 5}, {Host: "b", PausedUntil: new(time.Now().Add(time.Minute))}}}
	cfg.Progress(st)
	cfg.Progress(st) // within progressEvery: not logged
	st.Running, st.Fetched = false, 15
	cfg.Progress(st) // the end: logged
	w.finish()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), buf.String())
	}
	for _, want := range []string{"msg=progress", "fetched=10", "queued=5", "hosts_active=1", "hosts_paused=1", "over_limit=2", "retries=3", "errors=0"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("progress line %q lacks %s", lines[0], want)
		}
	}
	if strings.ContainsAny(buf.String(), "\r\033") {
		t.Errorf("terminal control characters written off a terminal: %q", buf.String())
	}
}

// TestLiveLine: on a terminal the live line is redrawn in place, and a log record clears it
// first and draws it again after.
func TestLiveLine(t *testing.T) {
	var buf bytes.Buffer
	lw := &lineWriter{w: &buf, tty: true, width: 30}
	lw.setLine("12s  300 pages (25.0/s)  queued 28  hosts: 3 active")
	lw.Write([]byte("level=WARN msg=x\n"))
	lw.endLine()
	want := "\r\033[K12s  300 pages (25.0/s)  queu" + "\r\033[Klevel=WARN msg=x\n" + "12s  300 pages (25.0/s)  queu" + "\n"
	if buf.String() != want {
		t.Errorf("wrote %q\nwant  %q", buf.String(), want)
	}
}
