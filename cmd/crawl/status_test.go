package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
)

// someStatus has n contacted hosts (h000.example busiest) and notCrawled hosts only linked to,
// queued of them with URLs queued.
func someStatus(n, notCrawled, queued int) crawler.Status {
	st := crawler.Status{HostsNotCrawled: notCrawled, HostsNotCrawledQueued: queued}
	for i := range n {
		st.Hosts = append(st.Hosts, crawler.HostStatus{Host: fmt.Sprintf("h%03d.example", i), Pages: 1000 - i})
	}
	return st
}

// hostRows returns the host names of the table rows in out, in order.
func hostRows(out string) []string {
	var hs []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "h") && strings.HasSuffix(f[0], ".example") {
			hs = append(hs, f[0])
		}
	}
	return hs
}

func TestPrintHostTable(t *testing.T) {
	cases := []struct {
		name                  string
		st                    crawler.Status
		limit                 int
		rows                  int
		more, linked, nothing string // lines expected ("" for none)
	}{
		{name: "no hosts at all", st: someStatus(0, 0, 0), limit: 50},
		{name: "only linked to", st: someStatus(0, 170, 0), limit: 50,
			linked: "and 170 hosts linked to but not crawled\n"},
		{name: "one linked, queued", st: someStatus(2, 1, 1), limit: 50, rows: 2,
			linked: "and 1 host linked to but not crawled (1 with URLs queued)\n"},
		{name: "under the cap", st: someStatus(3, 0, 0), limit: 50, rows: 3},
		{name: "at the cap", st: someStatus(50, 0, 0), limit: 50, rows: 50},
		{name: "over the cap", st: someStatus(100_000, 99, 40), limit: 50, rows: 50,
			more:   "… and 99950 more hosts crawled (--hosts N or --all lists them)\n",
			linked: "and 99 hosts linked to but not crawled (40 with URLs queued)\n"},
		{name: "one more", st: someStatus(4, 0, 0), limit: 3, rows: 3,
			more: "… and 1 more host crawled (--hosts N or --all lists them)\n"},
		{name: "all", st: someStatus(120, 5, 0), limit: -1, rows: 120,
			linked: "and 5 hosts linked to but not crawled\n"},
		{name: "none listed", st: someStatus(7, 0, 0), limit: 0,
			more: "… and 7 more hosts crawled (--hosts N or --all lists them)\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printHostTable(&b, tc.st, tc.limit)
			out := b.String()
			rows := hostRows(out)
			if len(rows) != tc.rows {
				t.Fatalf("%d rows, want %d:\n%s", len(rows), tc.rows, out)
			}
			for i, h := range rows {
				if h != tc.st.Hosts[i].Host {
					t.Fatalf("row %d is %s, want %s (the status's order, busiest first)", i, h, tc.st.Hosts[i].Host)
				}
			}
			if (tc.rows > 0) != strings.Contains(out, "host ") {
				t.Errorf("header shown %v with %d rows:\n%s", strings.Contains(out, "host "), tc.rows, out)
			}
			for _, line := range []struct{ prefix, want string }{{"… and", tc.more}, {"and ", tc.linked}} {
				got := ""
				for _, l := range strings.SplitAfter(out, "\n") {
					if strings.HasPrefix(l, line.prefix) {
						got += l
					}
				}
				if got != line.want {
					t.Errorf("%q lines = %q, want %q", line.prefix, got, line.want)
				}
			}
		})
	}
}

func TestPrintSummaryHosts(t *testing.T) {
	cases := []struct {
		name       string
		st         crawler.Status
		rows       int
		more, tail string
	}{
		{name: "few", st: someStatus(3, 0, 0), rows: 3},
		{name: "docs site with many links out", st: someStatus(1, 170, 0), rows: 1,
			tail: "and 170 hosts linked to but not crawled\n"},
		{name: "broad", st: someStatus(10_000, 2_000, 1_500), rows: summaryHostRows,
			more: "… and 9985 more hosts crawled (crawl status --data DIR --all lists them)\n",
			tail: "and 2000 hosts linked to but not crawled (1500 with URLs queued)\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printSummary(&b, &crawler.Summary{Status: tc.st, StopReason: "done", Elapsed: time.Second})
			out := b.String()
			if rows := hostRows(out); len(rows) != tc.rows || rows[0] != "h000.example" {
				t.Errorf("rows %v, want %d from h000.example:\n%s", rows, tc.rows, out)
			}
			if !strings.HasSuffix(out, tc.more+tc.tail) || (tc.more == "" && strings.Contains(out, "more hosts")) {
				t.Errorf("summary does not end with %q%q:\n%s", tc.more, tc.tail, out)
			}
		})
	}
}

// TestStatusCommandNotCrawled: on a store whose seeds were never requested, crawl status lists
// no host and counts them; --json says the same with "hosts": [] and "hosts_not_crawled".
func TestStatusCommandNotCrawled(t *testing.T) {
	cfg := crawler.Defaults()
	cfg.Dir = t.TempDir()
	cfg.Seeds = []string{"http://127.0.0.2:9/", "http://127.0.0.3:9/"}
	c, err := crawler.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	var out, errb bytes.Buffer
	if code := statusCmd([]string{"--data", cfg.Dir}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.HasSuffix(out.String(), "\n\nand 2 hosts linked to but not crawled (2 with URLs queued)\n") || strings.Contains(out.String(), "\nhost ") {
		t.Errorf("crawl status:\n%s", out.String())
	}

	out.Reset()
	if code := statusCmd([]string{"--data", cfg.Dir, "--json"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var js map[string]any
	if err := json.Unmarshal(out.Bytes(), &js); err != nil {
		t.Fatal(err)
	}
	if hs, ok := js["hosts"].([]any); !ok || len(hs) != 0 || js["hosts_not_crawled"] != 2.0 || js["hosts_not_crawled_queued"] != 2.0 {
		t.Errorf("crawl status --json: hosts %v, hosts_not_crawled %v, hosts_not_crawled_queued %v; want [], 2, 2",
			js["hosts"], js["hosts_not_crawled"], js["hosts_not_crawled_queued"])
	}

	for _, bad := range [][]string{{"--data", cfg.Dir, "--hosts", "-1"}, {"--data", cfg.Dir, "--hosts", "x"}} {
		if code := statusCmd(bad, &out, &errb); code != exitUsage {
			t.Errorf("crawl status %q: exit %d, want %d", bad, code, exitUsage)
		}
	}
}
