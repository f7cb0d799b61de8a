package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/gcfloor"
	"github.com/crawl-project/crawl/internal/termsafe"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/storage"
	"github.com/redis/go-redis/v9"
)

func init() {
	commands["run"] = command{summary: "crawl from seed URLs or a seed file, or resume the crawl in --data", run: runCmd}
}

// regexpList is a repeatable flag of regular expressions.
type regexpList []*regexp.Regexp

func (r *regexpList) String() string { return fmt.Sprint([]*regexp.Regexp(*r)) }
func (r *regexpList) Set(s string) error {
	re, err := regexp.Compile(s)
	if err != nil {
		return err
	}
	*r = append(*r, re)
	return nil
}

// wordList is a repeatable flag of comma-separated words, lowercased, a leading dot dropped
// (".PDF" → "pdf").
type wordList []string

func (l *wordList) String() string { return strings.Join(*l, ",") }
func (l *wordList) Set(s string) error {
	for w := range strings.SplitSeq(s, ",") {
		if w = strings.TrimPrefix(strings.ToLower(strings.TrimSpace(w)), "."); w != "" {
			*l = append(*l, w)
		}
	}
	return nil
}

// crawlFlags registers the flags shared by run and demo on fs and returns the config they fill.
func crawlFlags(fs *flag.FlagSet) *crawler.Config {
	cfg := crawler.Defaults()
	fs.TextVar(&cfg.Scope, "scope", cfg.Scope, "what is in scope: `host|domain` (host: the seeds' hosts; domain: their registrable domains)")
	fs.TextVar(&cfg.MaxDepth, "max-depth", cfg.MaxDepth, "most link `hops` from a seed (-1: unlimited; 0: the seeds alone)")
	fs.BoolVar(&cfg.Sitemaps, "sitemaps", false, "also crawl the URLs each host's sitemaps list (robots.txt Sitemap lines, /sitemap.xml)")
	fs.BoolVar(&cfg.Requisites, "requisites", false, "also fetch what each page needs to be shown: stylesheets, scripts, images, icons, fonts (not counted as link hops; their links not followed)")
	fs.TextVar(&cfg.RequisitesScope, "requisites-scope", cfg.RequisitesScope, "hosts requisites are fetched from: `any|host` (host: the crawl's scope)")
	fs.IntVar(&cfg.MaxPages, "max-pages", cfg.MaxPages, "stop after this many pages fetched, all runs together (0: unlimited)")
	fs.IntVar(&cfg.MaxHostPages, "max-host-pages", cfg.MaxHostPages, "most URLs of one host queued for fetching, all runs together; further links to it are excluded as limit (0: unlimited)")
	fs.StringVar(&cfg.UserAgent, "user-agent", cfg.UserAgent, "User-Agent header; its product (MyBot in \"Mozilla/5.0 (compatible; MyBot/1.0; +URL)\") is the robots.txt product token")
	fs.StringVar(&cfg.RobotsAgent, "robots-agent", "", "robots.txt product token to obey (default: the --user-agent's product)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "most requests in flight overall")
	fs.IntVar(&cfg.HostConcurrency, "host-concurrency", cfg.HostConcurrency, "most requests in flight to one host")
	durationVar(fs, &cfg.Timeout, "timeout", cfg.Timeout, "per request, body included: a `duration` (30s, 2m; a bare number is seconds)")
	sizeVar(fs, &cfg.MaxBody, "max-body", cfg.MaxBody, "`bytes` of (decoded) body kept per response (10485760, 10M, 10MB); the rest is cut and the page marked truncated")
	fs.Var((*regexpList)(&cfg.Include), "include", "only URLs matching this `regexp` are crawled (repeatable: any may match)")
	fs.Var((*regexpList)(&cfg.Exclude), "exclude", "URLs matching this `regexp` are not crawled (repeatable)")
	fs.Var((*wordList)(&cfg.AcceptTypes), "accept-type", "keep only pages of these media `types`, e.g. text/html,text/* (repeatable); others are excluded as type after their headers, unread")
	fs.Var((*wordList)(&cfg.DenyExt), "deny-ext", "do not request URLs whose path ends in these `extensions`, e.g. pdf,zip,iso (repeatable); excluded as filter")
	fs.Float64Var(&cfg.InitialRate, "initial-rate", cfg.InitialRate, "requests/s to a host before anything is learned")
	fs.Float64Var(&cfg.MinRate, "min-rate", cfg.MinRate, "per-host rate floor, requests/s")
	fs.Float64Var(&cfg.MaxRate, "max-rate", cfg.MaxRate, "per-host rate ceiling, requests/s")
	fs.BoolVar(&cfg.IgnoreCrawlDelay, "ignore-crawl-delay", cfg.IgnoreCrawlDelay, "do not cap a host's rate by its robots.txt Crawl-delay")
	fs.IntVar(&cfg.MaxAttempts, "max-attempts", cfg.MaxAttempts, "attempts per URL before it fails (retryable errors only)")
	durationVar(fs, &cfg.RobotsTTL, "robots-ttl", cfg.RobotsTTL, "how long a fetched robots.txt is trusted (a `duration`)")
	fs.BoolVar(&cfg.AllowPrivate, "allow-private-networks", cfg.AllowPrivate, "connect to loopback/private/link-local addresses even when no seed is on them")
	fs.BoolVar(&cfg.KeyByIP, "key-by-ip", cfg.KeyByIP, "one politeness gate per server address instead of per host name (virtual hosts on one server share a rate)")
	renderFlags(fs, &cfg.Render)
	return &cfg
}

// gcFloor is the heap goal under which a run does not collect garbage (internal/gcfloor): a
// crawl whose live heap is small collects every ~16 MB of allocation instead of every few.
const gcFloor = 16 << 20

const runSynopsis = `usage: crawl run [URL...] [--seeds FILE|-] --data DIR [flags]

Crawls from the seeds (URLs given as arguments, a seed file, or stdin with --seeds -) until
nothing in scope is left. On a DIR that holds a crawl, resumes it with its stored settings;
seeds are then optional. A bare host name (www.example.com) is crawled as https://.

With --redis redis://HOST:PORT/DB, the process is one worker of the crawl --crawl NAME shared
through Redis: it joins it (or starts it; seeds are optional when joining), crawls the hosts
of its share of the partitions, keeps its pages in its own --data DIR, and exits 0 when the
whole shared crawl is done.`

func runCmd(args []string, stdout, stderr io.Writer) int {
	flags := newFlags("run", runSynopsis)
	fs := flags.FlagSet
	seeds := fs.String("seeds", "", "seed file: one URL per line, # comments; - reads stdin (optional when resuming)")
	dir := fs.String("data", "", "data directory holding the crawl store (created if missing)")
	out := outputFlags(fs)
	cfg := crawlFlags(fs)
	fs.StringVar(&cfg.DNSServer, "dns-server", "", "look host names up with the DNS server at IP:PORT instead of the system resolver")
	netOpts := networkFlags(fs)
	hostsConfig := fs.String("hosts-config", "", "per-host settings from this TOML `file`: max_rate, concurrency, ignore_robots, headers (see docs/cli.md); its path is stored with the settings and the file read again on resume (--hosts-config '' drops it)")
	var maxTime time.Duration
	durationVar(fs, &maxTime, "max-time", 0, "stop the run after this `duration`, as if interrupted, and exit 0 (0: no limit); run again to go on")
	retryStates := fs.String("retry", "", "put these URLs back in the queue with fresh attempts first: failed, excluded or failed,excluded")
	fs.BoolVar(&cfg.Recrawl, "recrawl", false, "revisit the fetched pages with conditional GETs (If-None-Match, If-Modified-Since): an unchanged page answers 304 and keeps its stored copy, a changed one is stored anew")
	fs.DurationVar(&cfg.RecrawlOlderThan, "older-than", 0, "with --recrawl, revisit only the pages last visited at least this long ago (e.g. 24h)")
	fs.StringVar(&cfg.LearnedFrom, "learned-from", "", "start each host another crawl's data directory, or a file of crawl export --format learned, has learned at its learned rate and window, as a hint (a rate above --initial-rate, at most --max-rate; never a pause or a cap; re-checked as usual); `PATH` is read, never written, and a directory must not be in use; not stored")
	logURLs := fs.String("log-urls", "", "append one JSON line per URL fetched, failed or excluded to FILE as it happens")
	prof := profileFlags(fs)
	shared := fleetFlags(fs)
	argSeeds, code, ok := flags.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "crawl run: --data DIR is required")
		return exitUsage
	}
	cfg.Dir = *dir
	if shared.redisURL != "" {
		if bad := sharedUnsupported(fs); len(bad) > 0 {
			fmt.Fprintf(stderr, "crawl run: %s cannot be used with --redis (a shared crawl does not revise URLs already seen)\n", strings.Join(bad, ", "))
			return exitUsage
		}
	}
	gaveHostsConfig := flagGiven(fs, "hosts-config")
	var applied map[string]bool
	if shared.redisURL == "" { // a shared crawl's settings are the crawl's (takeCrawlSettings)
		var err error
		if applied, err = applyStored(fs, *dir); err != nil {
			fmt.Fprintf(stderr, "crawl run: %v\n", err)
			damageHint(stderr, *dir, err)
			return exitRuntime
		}
	}
	if *seeds != "" || len(argSeeds) > 0 {
		urls, guessed, err := readSeeds(*seeds, argSeeds, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "crawl run: %v\n", err)
			return exitUsage
		}
		cfg.Seeds = urls
		cfg.HTTPFallback = guessed
	} else if !storeExists(*dir) && shared.redisURL == "" {
		fmt.Fprintf(stderr, "crawl run: %s holds no crawl to resume; give seed URLs or --seeds FILE to start one\n", *dir)
		return exitUsage
	}
	var err error
	var rdb redis.UniversalClient
	if shared.redisURL != "" {
		if rdb, code = joinSettings(fs, cfg, shared, stderr); code != exitOK {
			return code
		}
		defer rdb.Close()
	}
	if cfg.Net, err = netOpts.network(); err != nil {
		fmt.Fprintf(stderr, "crawl run: %v\n", err)
		return exitUsage
	}
	if *hostsConfig != "" {
		if cfg.Hosts, cfg.Net.HostHeader, err = readHostsConfig(*hostsConfig); err != nil {
			if !gaveHostsConfig {
				fmt.Fprintf(stderr, "crawl run: --hosts-config %v (stored with the settings of %s; give --hosts-config FILE, or --hosts-config '' to run without it)\n", err, *dir)
			} else {
				fmt.Fprintf(stderr, "crawl run: --hosts-config %v\n", err)
			}
			return exitUsage
		}
		if cfg.HostsConfig, err = filepath.Abs(*hostsConfig); err != nil {
			fmt.Fprintf(stderr, "crawl run: --hosts-config %v\n", err)
			return exitUsage
		}
	}
	if maxTime < 0 {
		fmt.Fprintf(stderr, "crawl run: --max-time must not be negative, not %v\n", maxTime)
		return exitUsage
	}
	out.maxTime = maxTime
	if err := setRetry(cfg, *retryStates); err != nil {
		fmt.Fprintf(stderr, "crawl run: %v\n", err)
		return exitUsage
	}
	if err := cfg.ValidateGiven(); err != nil {
		if fromStore(err, applied) {
			err = storedDamage(*dir, "its stored settings make no valid crawl: "+err.Error())
			fmt.Fprintf(stderr, "crawl run: %v\n", err)
			damageHint(stderr, *dir, err)
			return exitRuntime
		}
		fmt.Fprintf(stderr, "crawl run: %v\n", err)
		return exitUsage
	}
	if err := checkBrowser(cfg.Render, applied["render"]); err != nil {
		fmt.Fprintf(stderr, "crawl run: %v\n", err)
		return exitUsage
	}
	if *logURLs != "" {
		f, err := os.OpenFile(*logURLs, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "crawl run: --log-urls: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		cfg.URLLog = f
	}
	if err := out.validate(); err != nil {
		fmt.Fprintf(stderr, "crawl run: %v\n", err)
		return exitUsage
	}
	stop, err := prof.start()
	if err != nil {
		fmt.Fprintf(stderr, "crawl run: %v\n", err)
		return exitUsage
	}
	out.beforeClose = prof.writeHeap
	defer gcfloor.Start(gcFloor)()
	if shared.redisURL != "" {
		code = crawlShared(*cfg, rdb, shared, out, stdout, stderr)
	} else {
		code = crawl(*cfg, out, stdout, stderr)
	}
	if err := stop(); err != nil {
		fmt.Fprintf(stderr, "crawl run: %v\n", err)
	}
	return code
}

// readSeeds returns the seeds of the seed file (stdin for "-"; none for "") and of the
// command-line arguments, in that order, each once. Bad ones are reported on stderr and
// skipped, bare host names are reported as taken for https:// and their host keys returned in
// guessed (crawler.Config.HTTPFallback); it fails if none is left.
func readSeeds(file string, args []string, stderr io.Writer) (urls []string, guessed map[string]bool, err error) {
	var notes []crawler.SeedError
	add := func(u []string, bad []crawler.SeedError) {
		urls = append(urls, u...)
		notes = append(notes, bad...)
	}
	switch file {
	case "":
	case "-":
		u, bad, err := crawler.ParseSeeds(os.Stdin, "stdin")
		if err != nil {
			return nil, nil, fmt.Errorf("stdin: %w", err)
		}
		add(u, bad)
	default:
		u, bad, err := crawler.ReadSeeds(file)
		if err != nil {
			return nil, nil, err
		}
		add(u, bad)
	}
	if len(args) > 0 {
		add(crawler.ParseSeedArgs(args))
	}
	urls, notes = crawler.SchemesFromSeeds(urls, notes)
	for _, n := range notes {
		if n.Outcome == crawler.SeedAssumedHTTPS {
			if u, err := url.Parse(n.URL); err == nil {
				if guessed == nil {
					guessed = map[string]bool{}
				}
				guessed[urlnorm.HostKey(u)] = true
			}
		}
		if n.Outcome == crawler.SeedSkipped {
			fmt.Fprintf(stderr, "%v (skipped)\n", n)
		} else {
			fmt.Fprintf(stderr, "%v\n", n)
		}
	}
	if len(urls) == 0 { // duplicates across sources are left to the frontier, which adds a URL once
		name := map[string]string{"": "arguments", "-": "stdin"}[file]
		return nil, nil, fmt.Errorf("%s: no valid seed URL", cmp.Or(name, file))
	}
	return urls, guessed, nil
}

// setRetry sets cfg's --retry choices from v: "failed", "excluded" or both, comma-separated.
func setRetry(cfg *crawler.Config, v string) error {
	if v == "" {
		return nil
	}
	for _, s := range strings.Split(v, ",") {
		switch strings.TrimSpace(s) {
		case "failed":
			cfg.RetryFailed = true
		case "excluded":
			cfg.RetryExcluded = true
		default:
			return fmt.Errorf("--retry takes failed, excluded or failed,excluded, not %q", v)
		}
	}
	return nil
}

// crawl runs one crawl to its end with signal handling and prints the summary.
func crawl(cfg crawler.Config, out *outputOptions, stdout, stderr io.Writer) int {
	return crawlWith(cfg, out, stdout, stderr, crawler.Open)
}

// crawlWith is crawl with the crawler opened by open (crawler.Open, or a worker of a shared
// crawl).
func crawlWith(cfg crawler.Config, out *outputOptions, stdout, stderr io.Writer, open func(crawler.Config) (*crawler.Crawler, error)) int {
	sigCtx, stop := interruptible(stderr)
	defer stop()
	ctx := sigCtx
	if out.maxTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(sigCtx, out.maxTime)
		defer cancel()
	}
	w, err := out.watch(&cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "crawl: %v\n", err)
		return exitRuntime
	}
	defer w.close()
	c, err := open(cfg)
	if errors.Is(err, crawler.ErrUsage) {
		fmt.Fprintf(stderr, "crawl: %v\n", err)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "crawl: %v\n", err)
		damageHint(stderr, cfg.Dir, err)
		return exitRuntime
	}
	if st := c.Start(); st.Kind == crawler.Resumed {
		fmt.Fprintf(stderr, "resuming: %d fetched, %d queued (%d failed, %d excluded)\n", st.Found.Fetched, st.Found.Queued, st.Found.Failed, st.Found.Excluded)
	}
	changes, revised := c.Changes()
	printChanges(stderr, changes, revised)
	if cfg.Recrawl {
		printRecrawlLeft(stderr, cfg.RecrawlOlderThan, revised, c.RecrawlAges(), time.Now())
	}
	w.attach(c)
	sum, runErr := c.Run(ctx)
	if out.beforeClose != nil {
		if err := out.beforeClose(); err != nil {
			fmt.Fprintf(stderr, "crawl: %v\n", err)
		}
	}
	if err := c.Close(); err != nil && runErr == nil {
		runErr = err
	}
	w.finish()
	if errors.Is(runErr, crawler.ErrInterrupted) && sigCtx.Err() == nil { // --max-time, not a signal
		runErr = nil
		sum.StopReason = "max-time"
	}
	if sum != nil {
		printSummary(stdout, sum)
		if sum.StopReason == "deferred" {
			fmt.Fprintf(stdout, "%d URLs wait on hosts that asked for a long pause; run the same command again after %s to fetch them\n",
				sum.Queued, sum.DeferredUntil.Local().Format(time.DateTime))
		}
	}
	switch {
	case sum != nil && sum.StopReason == "max-time":
		fmt.Fprintf(stderr, "crawl: stopped after --max-time %v; everything fetched is saved. Run again to go on.\n", out.maxTime)
	case runErr == nil && sum != nil && sum.StopReason == "done" && sum.Fetched == 0 && sum.Failed+sum.Excluded > 0:
		fmt.Fprintln(stderr, "crawl: nothing was fetched: every seed failed or was excluded (reasons above); fix the cause and run again with --retry failed,excluded")
		return exitRuntime
	case errors.Is(runErr, crawler.ErrInterrupted):
		fmt.Fprintf(stderr, "crawl: interrupted; everything fetched is saved. Run the same command again to resume.\n")
		return exitInterrupted
	case errors.Is(runErr, frontier.ErrCorrupt), errors.Is(runErr, frontier.ErrNotLeased):
		// The frontier's records contradict each other (a URL queued twice, and so leased
		// twice, is one way): the store is damaged, whatever the disk's free space.
		runErr = storedDamage(cfg.Dir, runErr.Error())
		fmt.Fprintf(stderr, "crawl: %v\n", runErr)
		damageHint(stderr, cfg.Dir, runErr)
		return exitRuntime
	case errors.Is(runErr, storage.ErrDamaged):
		fmt.Fprintf(stderr, "crawl: %v\n", runErr)
		damageHint(stderr, cfg.Dir, runErr)
		return exitRuntime
	case runErr != nil:
		fmt.Fprintf(stderr, "crawl: %v\n", runErr)
		fmt.Fprintf(stderr, "crawl: stopped. Everything committed before the error is safe in %s; fix the cause (e.g. free disk space) and run the same command again to resume.\n", cfg.Dir)
		return exitRuntime
	}
	return exitOK
}

// interruptible returns a context cancelled by the first SIGINT or SIGTERM. A second signal
// exits at once with status 130; bbolt's commits are atomic, so the store stays sound.
func interruptible(stderr io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		fmt.Fprintln(stderr, "\ncrawl: stopping: finishing requests in flight (signal again to quit now)")
		cancel()
		<-sigs
		fmt.Fprintln(stderr, "crawl: quit at once")
		os.Exit(exitInterrupted)
	}()
	return ctx, func() { signal.Stop(sigs); cancel() }
}

func storeExists(dir string) bool {
	_, err := os.Stat(dir + "/crawl.db")
	return err == nil
}

// printSummary says what the run did: its own figures, and the crawl's totals apart when the
// run went on with a stored crawl or was one worker of a shared one; what its revisits found.
func printSummary(w io.Writer, s *crawler.Summary) {
	took := s.Elapsed.Round(time.Millisecond)
	switch st := s.Start; st.Kind {
	case crawler.Resumed:
		fmt.Fprintf(w, "crawl %s in %s: this run %d fetched, %d failed, %d excluded; all runs %d fetched, %d failed, %d excluded, %d queued\n",
			s.StopReason, took, max(s.Fetched-st.Opened.Fetched, 0), max(s.Failed-st.Opened.Failed, 0), max(s.Excluded-st.Opened.Excluded, 0),
			s.Fetched, s.Failed, s.Excluded, s.Queued)
	case crawler.SharedWorker:
		fmt.Fprintf(w, "crawl %s in %s: this worker %d fetched; the shared crawl %d fetched, %d failed, %d excluded, %d queued\n",
			s.StopReason, took, s.ThisRun.Fetched, s.Fetched, s.Failed, s.Excluded, s.Queued)
	default:
		fmt.Fprintf(w, "crawl %s in %s: %d fetched, %d failed, %d excluded, %d queued\n",
			s.StopReason, took, s.Fetched, s.Failed, s.Excluded, s.Queued)
	}
	if r := s.ThisRun; r.Revisits() > 0 {
		fmt.Fprintf(w, "  revisited %d: %d unchanged, %d changed, %d gone; %d new pages\n", r.Revisits(), r.Unchanged, r.Changed, r.Gone, r.New)
	}
	printRender(w, s.Render)
	printReasons(w, "failed", s.FailedBy)
	printReasons(w, "excluded", s.ExcludedBy)
	printDropped(w, s.Dropped)
	shown := s.Hosts[:min(len(s.Hosts), summaryHostRows)]
	if len(shown) > 0 {
		fmt.Fprintf(w, "%-28s %7s %7s %7s %8s %8s %6s\n", "host", "pages", "failed", "queued", "rate/s", "p95 ms", "429s")
	}
	for _, h := range shown {
		fmt.Fprintf(w, "%-28s %7d %7d %7d %8.1f %8.1f %6d\n", termsafe.Escape(h.Host), h.Pages, h.Failed, h.Queued, h.Rate, h.P95Ms, h.OverLimit)
	}
	printHostsLeftOut(w, s.Status, len(shown), "crawl status --data DIR --all lists them")
	printFailedHosts(w, s.Hosts, s.HostsFailed)
}

// failedHostRows is how many hosts whose every request failed the summary names: those the
// crawl's snapshot keeps listed however little they were used.
const failedHostRows = crawler.FailedListed

// printFailedHosts names the hosts that served nothing and failed, with the last cause; total
// counts them all, listed or not (Status.HostsFailed).
func printFailedHosts(w io.Writer, hosts []crawler.HostStatus, total int) {
	n := 0
	for _, h := range hosts {
		if h.Pages > 0 || h.Failed == 0 && h.LastError == "" {
			continue
		}
		if n++; n <= failedHostRows {
			fmt.Fprintf(w, "every request to %s failed: %s\n", termsafe.Escape(h.Host), cmp.Or(termsafe.Escape(h.LastError), "no cause recorded"))
		}
	}
	n = max(n, total)
	if n > failedHostRows {
		fmt.Fprintf(w, "… and %d more hosts whose every request failed (crawl urls --data DIR --state failed lists their URLs)\n", n-failedHostRows)
	}
}

// summaryHostRows is how many hosts, the busiest, the summary at the end of a run lists.
const summaryHostRows = 15

func printReasons(w io.Writer, what string, m map[string]int) {
	if len(m) == 0 {
		return
	}
	fmt.Fprintf(w, "  %s by reason: %s\n", what, byReason(m))
}
