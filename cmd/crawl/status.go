package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/termsafe"
	"github.com/crawl-project/crawl/storage"
)

func init() {
	commands["status"] = command{summary: "show a crawl's counts and per-host figures (works while it runs)", run: statusCmd}
}

const statusSynopsis = `usage: crawl status --data DIR [--json] [--hosts N | --all]
       crawl status --redis redis://HOST:PORT/DB [--crawl NAME] [--json]

Prints the settings in force, URL counts by state and reason, and per host the learned rate,
window, latency and last error; it works while a crawl runs. With --redis: the shared crawl's
counts across all its workers, and each worker's partitions, pages and last heartbeat.

The phase column says where a host's rate is on its way (docs/politeness.md, docs/aimd.md):
  slow-start   no refusal seen yet: the rate grows fast while the host stays quick
  refusal-run  refused with no success since: each refusal backs off further
  return       after a decrease: climbing back to the rate the host last took (the plateau)
  search       the plateau is well under the last refused rate: raised toward it step by step
  probe        at the plateau: probing slowly for a higher limit`

func statusCmd(args []string, stdout, stderr io.Writer) int {
	flags := newFlags("status", statusSynopsis)
	fs := flags.FlagSet
	dir := fs.String("data", "", "data directory of the crawl")
	asJSON := fs.Bool("json", false, "print the stable JSON form (see docs/cli.md); it lists every host contacted")
	rows := fs.Int("hosts", defaultHostRows, "list at most this many hosts, busiest first")
	all := fs.Bool("all", false, "list every host contacted (overrides --hosts)")
	redisURL := fs.String("redis", "", "the Redis (or Valkey) of a crawl shared by several workers, as "+redisURLForm+" (one node of a Redis Cluster finds the rest): show the fleet's view")
	crawlName := fs.String("crawl", "default", "with --redis: the shared crawl's name")
	pos, code, ok := flags.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if *redisURL != "" && *dir == "" && len(pos) == 0 {
		return fleetStatusCmd(*redisURL, *crawlName, *asJSON, stdout, stderr)
	}
	if *dir == "" || *redisURL != "" || len(pos) > 0 || *rows < 0 {
		fmt.Fprintln(stderr, strings.SplitN(statusSynopsis, "\n", 2)[0])
		return exitUsage
	}
	if *all {
		*rows = -1
	}
	st, err := crawler.ReadStatus(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "crawl status: %v\n", err)
		damageHint(stderr, *dir, err)
		return exitRuntime
	}
	if !st.Running {
		if err := checkStopped(*dir); err != nil {
			fmt.Fprintf(stderr, "crawl status: %v\n", err)
			damageHint(stderr, *dir, err)
			return exitRuntime
		}
	}
	if *asJSON {
		if st.Hosts == nil {
			st.Hosts = []crawler.HostStatus{}
		}
		return printStatusJSON(stdout, stderr, st)
	}
	state := "stopped"
	if st.Running {
		state = fmt.Sprintf("running (snapshot %s old)", time.Since(st.UpdatedAt).Round(100*time.Millisecond))
	}
	fmt.Fprintf(stdout, "crawl in %s: %s\n", *dir, state)
	if st.Settings != nil {
		fmt.Fprintf(stdout, "settings: %s\n", st.Settings)
	}
	switch {
	case st.Shared != nil && !st.Running:
		fmt.Fprintf(stdout, "a worker's store of the shared crawl %q at %s: its URLs are in Redis (crawl status --redis %s --crawl %s)\n",
			st.Shared.Crawl, st.Shared.Redis, st.Shared.Redis, st.Shared.Crawl)
	case st.Shared != nil:
		fmt.Fprintf(stdout, "a worker of the shared crawl %q at %s; the counts are the fleet's\n", st.Shared.Crawl, st.Shared.Redis)
		fallthrough
	default:
		fmt.Fprintf(stdout, "fetched %d  failed %d  excluded %d  queued %d  in flight %d\n", st.Fetched, st.Failed, st.Excluded, st.Queued, st.InFlight)
	}
	printRender(stdout, st.Render)
	printReasons(stdout, "failed", st.FailedBy)
	printReasons(stdout, "excluded", st.ExcludedBy)
	printDropped(stdout, st.Dropped)
	printHostTable(stdout, st, *rows)
	return exitOK
}

// printDropped says how many over-budget URLs were counted and not stored, if any.
func printDropped(w io.Writer, n int) {
	if n > 0 {
		fmt.Fprintf(w, "  over --max-host-pages and not stored (counted only): %d\n", n)
	}
}

// defaultHostRows is how many hosts crawl status lists unless told otherwise.
const defaultHostRows = 50

// printHostTable prints st's hosts, busiest first, at most limit of them (all if limit < 0),
// then a line counting the hosts left out and one counting the hosts only linked to.
func printHostTable(w io.Writer, st crawler.Status, limit int) {
	shown := st.Hosts
	if limit >= 0 && len(shown) > limit {
		shown = shown[:limit]
	}
	if len(shown) > 0 {
		fmt.Fprintf(w, "\n%-28s %7s %6s %6s %8s %6s %-11s %8s %8s %6s %-20s %s\n",
			"host", "pages", "queued", "failed", "rate/s", "window", "phase", "p95 ms", "base ms", "429s", "paused until", "last error")
	}
	for _, h := range shown {
		paused := "-"
		if h.PausedUntil != nil {
			paused = h.PausedUntil.Local().Format("15:04:05.000")
		}
		fmt.Fprintf(w, "%-28s %7d %6d %6d %8.2f %6d %-11s %8.1f %8.1f %6d %-20s %s\n",
			termsafe.Escape(h.Host), h.Pages, h.Queued, h.Failed, h.Rate, h.Window, cmp.Or(h.Phase, "-"), h.P95Ms, h.BaselineMs, h.OverLimit, paused, termsafe.Escape(h.LastError))
	}
	if len(shown) == 0 && len(st.Hosts)+st.HostsNotCrawled > 0 {
		fmt.Fprintln(w)
	}
	printHostsLeftOut(w, st, len(shown), "--hosts N or --all lists them")
}

// printHostsLeftOut prints the lines that end a host table of which shown rows were printed:
// how many contacted hosts were left out (and hint, how to see them), and how many hosts were
// only linked to.
func printHostsLeftOut(w io.Writer, st crawler.Status, shown int, hint string) {
	if more := len(st.Hosts) + st.HostsNotListed - shown; more > 0 {
		fmt.Fprintf(w, "… and %d more %s crawled (%s)\n", more, plural(more, "host", "hosts"), hint)
	}
	if n := st.HostsNotCrawled; n > 0 {
		fmt.Fprintf(w, "and %d %s linked to but not crawled", n, plural(n, "host", "hosts"))
		if q := st.HostsNotCrawledQueued; q > 0 {
			fmt.Fprintf(w, " (%d with URLs queued)", q)
		}
		fmt.Fprintln(w)
	}
}

// printStatusJSON writes v, a status, in its indented JSON form.
func printStatusJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "crawl status: %v\n", err)
		return exitRuntime
	}
	return exitOK
}

// statusCheckMax is the largest store crawl status checks for damage (the check reads every
// page of the file's trees, so its time grows with the file); crawl check checks any.
const statusCheckMax = 256 << 20

// checkStopped runs the store's page check (storage.DB.Check) over the stopped store in dir, if it is at most
// statusCheckMax bytes, and returns an error wrapping storage.ErrDamaged if it finds damage:
// the counts crawl status shows come from records that can be intact while others are not.
func checkStopped(dir string) error {
	path := filepath.Join(dir, storage.FileName)
	if fi, err := os.Stat(path); err != nil || fi.Size() > statusCheckMax {
		return nil
	}
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true})
	if err != nil {
		if errors.Is(err, storage.ErrLocked) {
			return nil // a crawl started meanwhile
		}
		return err
	}
	defer db.Close()
	problems, total, err := db.Check(1)
	switch {
	case err != nil:
		return err
	case total > 0:
		return fmt.Errorf("%s: %w: %s", path, storage.ErrDamaged, problems[0])
	}
	return nil
}
