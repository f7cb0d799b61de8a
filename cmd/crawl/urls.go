package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"slices"
	"strings"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/termsafe"
	"github.com/crawl-project/crawl/storage"
)

func init() {
	commands["urls"] = command{summary: "list a crawl's URLs with their state, reason, status, attempts, depth and parent", run: urlsCmd}
}

// urlStates are the states --state accepts.
var urlStates = []string{"queued", "fetched", "failed", "excluded"}

// urlLine is one URL as `crawl urls --json` prints it; the field names are a stable interface
// (README "crawl urls").
type urlLine struct {
	URL      string `json:"url"`
	State    string `json:"state"`
	Reason   string `json:"reason,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Status   int    `json:"status,omitempty"`
	Attempts int    `json:"attempts"`
	Depth    int    `json:"depth"`
	Parent   string `json:"parent,omitempty"`
}

const urlsSynopsis = `usage: crawl urls --data DIR [--state S[,S]] [--reason R] [--host H] [--json]
       crawl urls --redis redis://HOST:PORT/DB [--crawl NAME] [--state queued] [--host H] [--json]

Lists the crawl's URLs with state, reason, HTTP status, attempts, depth and the page that
linked to them. With --redis: the URLs a shared crawl has queued (waiting, delayed for a
retry, or in flight); Redis keeps the others as fingerprints only.`

func urlsCmd(args []string, stdout, stderr io.Writer) int {
	flags := newFlags("urls", urlsSynopsis)
	fl := flags.FlagSet
	dir := fl.String("data", "", "data directory of the crawl")
	state := fl.String("state", "", "only URLs in these states (comma-separated): queued, fetched, failed, excluded")
	reason := fl.String("reason", "", "only URLs failed or excluded for this reason (e.g. depth, robots, conn-refused)")
	host := fl.String("host", "", "only URLs of this host (any port, or host:port for one)")
	asJSON := fl.Bool("json", false, "one JSON object per line instead of columns")
	redisURL := fl.String("redis", "", "the Redis (or Valkey) of a crawl shared by several workers, as redis://HOST:PORT/DB: list its queued URLs")
	crawlName := fl.String("crawl", "default", "with --redis: the shared crawl's name")
	pos, code, ok := flags.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if (*dir == "") == (*redisURL == "") || len(pos) > 0 {
		fmt.Fprintln(stderr, strings.SplitN(urlsSynopsis, "\n", 2)[0])
		return exitUsage
	}
	var states []string
	if *state != "" {
		for _, s := range strings.Split(*state, ",") {
			if !slices.Contains(urlStates, s) {
				fmt.Fprintf(stderr, "crawl urls: --state takes %s (comma-separated), not %q\n", strings.Join(urlStates, ", "), s)
				return exitUsage
			}
			states = append(states, s)
		}
	}
	if *redisURL != "" {
		return urlsShared(*redisURL, *crawlName, states, *reason, *host, *asJSON, stdout, stderr)
	}
	db, ok := openStopped("crawl urls", *dir, stderr, false)
	if !ok {
		return exitRuntime
	}
	defer db.Close()
	fr, err := frontier.Open(db, nil)
	if err != nil {
		fmt.Fprintf(stderr, "crawl urls: %v\n", err)
		damageHint(stderr, *dir, err)
		return exitRuntime
	}
	w := bufio.NewWriter(stdout)
	enc := json.NewEncoder(w)
	if !*asJSON {
		fmt.Fprintf(w, "%-8s %-18s %6s %8s %5s  %s  %s\n", "state", "reason", "status", "attempts", "depth", "url", "parent")
	}
	err = fr.Walk(func(r frontier.URLRecord) error {
		if len(states) > 0 && !slices.Contains(states, r.State) ||
			*reason != "" && r.Reason != *reason ||
			*host != "" && !hostMatches(r.Host, *host) {
			return nil
		}
		l := urlLine{URL: r.URL, State: r.State, Reason: r.Reason, Detail: r.Detail, Status: r.Status,
			Attempts: r.Attempts, Depth: r.Depth, Parent: r.Parent}
		if *asJSON {
			l.Detail = termsafe.Escape(l.Detail) // JSON leaves C1 and bidi controls as they are
			return enc.Encode(l)
		}
		status := "-"
		if l.Status != 0 {
			status = fmt.Sprint(l.Status)
		}
		_, err := fmt.Fprintf(w, "%-8s %-18s %6s %8d %5d  %s  %s\n", l.State, dash(l.Reason), status, l.Attempts, l.Depth,
			termsafe.Escape(l.URL), termsafe.Escape(dash(l.Parent)))
		return err
	})
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		fmt.Fprintf(stderr, "crawl urls: %v\n", err)
		damageHint(stderr, *dir, err)
		return exitRuntime
	}
	return exitOK
}

// openStopped opens the store in dir read-only for command cmd, failing at once (with a
// message on stderr) while a crawl holds it or when there is none. damaged opens a store whose
// pages are damaged too (storage.Options.Damaged), for check and salvage.
func openStopped(cmd, dir string, stderr io.Writer, damaged bool) (*storage.DB, bool) {
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true, Timeout: exportLockTimeout, Damaged: damaged})
	switch {
	case errors.Is(err, storage.ErrLocked):
		by := ""
		if pid := storage.HolderPID(dir); pid > 0 {
			by = fmt.Sprintf(" (process %d)", pid)
		}
		fmt.Fprintf(stderr, "%s: store %s is in use by a running crawl%s; stop it or wait\n", cmd, dir, by)
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(stderr, "%s: no crawl store in %s\n", cmd, dir)
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		damageHint(stderr, dir, err)
	default:
		return db, true
	}
	return nil, false
}

// hostMatches reports whether the host key hk (host[:port]) is want: want with a port must
// match exactly, want without one matches every port of that host.
func hostMatches(hk, want string) bool {
	hk, want = strings.ToLower(hk), strings.ToLower(want)
	if hk == want {
		return true
	}
	if _, _, err := net.SplitHostPort(want); err == nil {
		return false
	}
	h, _, err := net.SplitHostPort(hk)
	return err == nil && h == want
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
