package crawler

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/retry"
	"github.com/crawl-project/crawl/robots"
	"github.com/crawl-project/crawl/storage"
)

// DefaultUserAgent names the project and leaves a placeholder for the operator's contact.
const DefaultUserAgent = "crawl/0.1 (+contact: set --user-agent to name yourself)"

// Config is everything one crawl needs. It is built once (by cmd/crawl, or by the public
// package crawler from its Options) and passed down; there are no other knobs, no environment
// variables and no globals. A zero field takes its default (WithDefaults, Defaults).
type Config struct {
	// Settings are the crawl's choices the store keeps (settings.go): scope, filters,
	// politeness, request limits.
	Settings

	Dir   string   // data directory holding the store
	Seeds []string // normalized seed URLs (may be empty when resuming)
	// HTTPFallback holds the host keys (urlnorm.HostKey) of seeds given without a scheme
	// (SeedAssumedHTTPS): when such a host's https cannot connect or handshake, its
	// robots.txt and pages are fetched over http instead, as browsers and wget do.
	HTTPFallback map[string]bool

	Workers      int // global cap on requests in flight
	MaxRedirects int // redirect hops followed from one URL
	// Sitemap bounds what each host's sitemaps add to a run (budgets.go).
	Sitemap SitemapLimits
	// RobotsRetry is the first re-check delay after a host's robots.txt was unreachable; it
	// doubles with each failure up to a minute, and after robotsMaxFailures the host's URLs fail.
	RobotsRetry time.Duration
	// Retry is the backoff of a URL's retries; Settings.MaxAttempts bounds their number.
	Retry Backoff

	// Hosts holds the policies set for particular hosts, by host key (--hosts-config, whose
	// path is Settings.HostsConfig).
	Hosts map[string]HostPolicy

	// Revisit says what this run does again with URLs already seen (--retry, --recrawl).
	Revisit

	// URLLog, if set, receives one JSON line for each URL that is fetched, fails or is
	// excluded when its turn comes, as it happens (--log-urls).
	URLLog io.Writer

	// AllowPrivate lets the crawl connect to loopback, private and link-local addresses even
	// when no seed is on them (--allow-private-networks).
	AllowPrivate bool

	// KeyByIP gives the names one server answers for one gate: rate, window and back-off are
	// kept per resolved address instead of per host name (--key-by-ip; see gatekey.go).
	KeyByIP bool

	// LearnedFrom is the data directory of another crawl, or a file written by crawl export
	// --format learned, whose learned host politeness this one starts from (--learned-from): a
	// host this crawl's store holds no state for is restored from there, at its learned rate
	// and window, and re-checked from there as any restored host is. A store is opened
	// read-only (a shared lock) for the whole run, so it must not be in use by a running crawl;
	// neither is ever written.
	LearnedFrom string

	// Net is how requests reach the hosts: proxy, TLS, headers, credentials (network.go).
	Net Network

	// DNSServer is the DNS server every host name is looked up with, "ip:port"
	// (--dns-server); "" means the system resolver. Either way each name is looked up once
	// per TTL (fetch.Resolver).
	DNSServer string

	// DeferAfter: when every URL left waits longer than this (a host's Retry-After, a retry's
	// backoff), the run stops with StopReason "deferred" instead of idling; run again later.
	DeferAfter time.Duration

	// Grace bounds how long in-flight requests may run after the crawl is told to stop.
	Grace time.Duration
	// StatusEvery is how often DIR/status.json is rewritten while running.
	StatusEvery time.Duration

	Log *slog.Logger // nil: discard
	// Progress, if set, is called about once a second with a fresh status snapshot.
	Progress func(Status)

	// Hooks are a Go program's functions the loop calls (the public package crawler).
	Hooks Hooks
}

// Backoff is how long a URL's retries wait (retry.Policy): the ceiling of the first wait, and
// the ceiling no wait grows beyond.
type Backoff struct {
	Base, Cap time.Duration
}

// Revisit is what a run does again with the URLs a store has already seen, when the crawl
// opens. None of it is stored: it belongs to the run that asks.
type Revisit struct {
	// RetryFailed and RetryExcluded put the failed URLs, and the URLs excluded by robots.txt,
	// a private address or a setting that now admits them, back in the queue with fresh
	// attempts (--retry failed,excluded).
	RetryFailed, RetryExcluded bool

	// Recrawl queues the fetched URLs again, to be revisited with conditional GETs
	// (--recrawl); with RecrawlOlderThan > 0 only those whose last visit is at least that old
	// (--older-than).
	Recrawl          bool
	RecrawlOlderThan time.Duration
}

// Hooks are functions a Go program gives the loop. Each may be nil. They are called from the
// fetch goroutines at once, so each must be safe for concurrent use, and the crawl waits for
// them.
type Hooks struct {
	// InScope, if set, must also admit a URL (a link, a redirect's target, a sitemap's URL, a
	// requisite) for it to be queued; false excludes it as "filter". Seeds are not asked.
	InScope func(u *url.URL) bool
	// Link, if set, is asked about each link of a fetched page but nofollow ones, before scope,
	// depth, robots.txt and the seen-set; false excludes it as "filter".
	Link func(from, to *url.URL, depth int) bool
	// Stored is called with each fetched page once it is durable, before its URL is reported
	// done to the run's counters.
	Stored func(p *storage.Page, role frontier.Role)
}

// WithDefaults returns c with every zero field that has a default set to it: the one place
// the defaults are written. Open runs the crawl with c.WithDefaults(), and stores its Settings.
func (c Config) WithDefaults() Config {
	s := &c.Settings
	s.UserAgent = cmp.Or(s.UserAgent, DefaultUserAgent)
	s.HostConcurrency = cmp.Or(s.HostConcurrency, 8)
	s.Timeout = cmp.Or(s.Timeout, 30*time.Second)
	s.MaxBody = cmp.Or(s.MaxBody, 10<<20)
	s.MaxRate = cmp.Or(s.MaxRate, 1000)
	s.MinRate = cmp.Or(s.MinRate, 0.1)
	s.InitialRate = cmp.Or(s.InitialRate, 2)
	s.RobotsTTL = cmp.Or(s.RobotsTTL, 24*time.Hour)
	s.MaxAttempts = cmp.Or(s.MaxAttempts, 5)
	s.Render.Timeout = cmp.Or(s.Render.Timeout, DefaultRenderTimeout)
	c.Workers = cmp.Or(c.Workers, 32)
	c.MaxRedirects = cmp.Or(c.MaxRedirects, 10)
	c.RobotsRetry = cmp.Or(c.RobotsRetry, time.Second)
	c.Retry.Base = cmp.Or(c.Retry.Base, 500*time.Millisecond)
	c.Retry.Cap = cmp.Or(c.Retry.Cap, 60*time.Second)
	c.DeferAfter = cmp.Or(c.DeferAfter, 10*time.Minute)
	c.Grace = cmp.Or(c.Grace, 10*time.Second)
	c.StatusEvery = cmp.Or(c.StatusEvery, time.Second)
	return c
}

// Defaults returns a Config with every default filled in, for a caller that shows them (the
// command line's flags); callers override fields.
func Defaults() Config { return Config{}.WithDefaults() }

// retryPolicy is the retry policy of c's Retry and MaxAttempts.
func (c *Config) retryPolicy() retry.Policy {
	return retry.Policy{Base: c.Retry.Base, Cap: c.Retry.Cap, MaxAttempts: c.MaxAttempts}
}

// maxWorkers bounds --workers and --host-concurrency: far above what one process can use, low
// enough that what is sized by them stays small.
const maxWorkers = 100_000

func badRate(r float64) bool { return math.IsNaN(r) || math.IsInf(r, 0) }

// MinRobotsTTL is the shortest --robots-ttl: a host's pages wait while its robots.txt is
// fetched again, so a time-to-live shorter than a few fetches crawls nothing but robots.txt.
const MinRobotsTTL = time.Minute

// Validate reports the first impossible setting, naming the flag it comes from. A zero field
// takes its default (WithDefaults).
func (c *Config) Validate() error {
	r := c.WithDefaults()
	return r.ValidateGiven()
}

// ValidateGiven is Validate for a Config whose every field was set by its maker (the command
// line, from Defaults): a zero where a default would be is refused as a value given.
func (c *Config) ValidateGiven() error {
	switch {
	case c.Dir == "":
		return errors.New("--data is required")
	case !c.Scope.valid():
		return fmt.Errorf("--scope must be host or domain, not %v", c.Scope)
	case c.Workers < 1 || c.Workers > maxWorkers:
		return fmt.Errorf("--workers must be between 1 and %d, not %d", maxWorkers, c.Workers)
	case c.HostConcurrency < 1 || c.HostConcurrency > maxWorkers:
		return fmt.Errorf("--host-concurrency must be between 1 and %d, not %d", maxWorkers, c.HostConcurrency)
	case !c.MaxDepth.valid():
		return fmt.Errorf("--max-depth must be -1 (unlimited) or more, not %v", c.MaxDepth)
	case c.MaxHostPages < 0:
		return fmt.Errorf("--max-host-pages must not be negative, not %d", c.MaxHostPages)
	case badRate(c.MinRate):
		return fmt.Errorf("--min-rate must be a finite number, not %g", c.MinRate)
	case badRate(c.MaxRate):
		return fmt.Errorf("--max-rate must be a finite number, not %g", c.MaxRate)
	case badRate(c.InitialRate):
		return fmt.Errorf("--initial-rate must be a finite number, not %g", c.InitialRate)
	case c.RobotsTTL < MinRobotsTTL:
		return fmt.Errorf("--robots-ttl must be at least %v (a robots.txt older than that is fetched again before the next page; less leaves no time to crawl), not %v", MinRobotsTTL, c.RobotsTTL)
	case c.Timeout <= 0:
		return fmt.Errorf("--timeout must be positive, not %v", c.Timeout)
	case c.MaxBody < 1:
		return fmt.Errorf("--max-body must be at least 1 byte, not %d", c.MaxBody)
	case c.MaxPages < 0:
		return fmt.Errorf("--max-pages must not be negative, not %d", c.MaxPages)
	case c.MinRate <= 0:
		return fmt.Errorf("--min-rate must be positive, not %g", c.MinRate)
	case c.MaxRate < c.MinRate:
		return fmt.Errorf("--max-rate (%g) must not be below --min-rate (%g)", c.MaxRate, c.MinRate)
	case c.InitialRate <= 0:
		return fmt.Errorf("--initial-rate must be positive, not %g", c.InitialRate)
	case c.UserAgent == "":
		return errors.New("--user-agent must not be empty")
	case strings.ContainsFunc(c.UserAgent, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return fmt.Errorf("--user-agent must not contain control characters: %q", c.UserAgent)
	case c.RobotsAgent != "" && robots.ProductToken(c.RobotsAgent) != c.RobotsAgent:
		return fmt.Errorf("--robots-agent must be a product token (letters, '_' and '-'), not %q", c.RobotsAgent)
	case badMediaRange(c.AcceptTypes) != "":
		return fmt.Errorf("--accept-type takes media types such as text/html or text/*, not %q", badMediaRange(c.AcceptTypes))
	case badExt(c.DenyExt) != "":
		return fmt.Errorf("--deny-ext takes file extensions such as pdf or zip, not %q", badExt(c.DenyExt))
	case c.DNSServer != "" && !validAddrPort(c.DNSServer):
		return fmt.Errorf("--dns-server must be an IP address and port (e.g. 127.0.0.1:53), not %q", c.DNSServer)
	case !c.RequisitesScope.valid():
		return fmt.Errorf("--requisites-scope must be any or host, not %v", c.RequisitesScope)
	case c.RecrawlOlderThan < 0:
		return fmt.Errorf("--older-than must not be negative, not %v", c.RecrawlOlderThan)
	case c.RecrawlOlderThan > 0 && !c.Recrawl:
		return errors.New("--older-than needs --recrawl")
	case c.MaxAttempts < 1:
		return fmt.Errorf("--max-attempts must be at least 1, not %d", c.MaxAttempts)
	}
	if err := c.Render.validate(); err != nil {
		return err
	}
	for host, p := range c.Hosts {
		if p.MaxRate < 0 || math.IsNaN(p.MaxRate) || math.IsInf(p.MaxRate, 0) {
			return fmt.Errorf("--hosts-config: %s: max_rate must be a positive number of requests/s, not %g", host, p.MaxRate)
		}
		if p.MaxConcurrency < 0 {
			return fmt.Errorf("--hosts-config: %s: concurrency must be positive, not %d", host, p.MaxConcurrency)
		}
	}
	return nil
}

func validAddrPort(s string) bool {
	ap, err := netip.ParseAddrPort(s)
	return err == nil && ap.Port() != 0
}

func (c *Config) logger() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c.Log
}

// mediaRange is a media type or a wildcard over one, as --accept-type takes them.
var mediaRange = regexp.MustCompile(`^([a-z0-9][a-z0-9!#$&^_.+-]*/([a-z0-9][a-z0-9!#$&^_.+-]*|\*)|\*/\*)$`)

// badMediaRange returns the first of types that is not a lowercase media range, or "".
func badMediaRange(types []string) string {
	for _, t := range types {
		if !mediaRange.MatchString(t) {
			return t
		}
	}
	return ""
}

// badExt returns the first of exts that is not a lowercase extension without its dot, or "".
func badExt(exts []string) string {
	for _, e := range exts {
		if e == "" || strings.ContainsFunc(e, func(r rune) bool { return !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '_' || r == '-') }) {
			return e
		}
	}
	return ""
}

// HostPolicy overrides the crawl's settings for one host (--hosts-config). The zero value
// changes nothing.
type HostPolicy struct {
	// MaxRate caps the host's rate, requests/s, below what it would learn (and below its
	// robots.txt Crawl-delay, when that is lower still); 0: no cap of its own.
	MaxRate float64
	// MaxConcurrency caps the host's requests in flight below --host-concurrency; 0: no cap
	// of its own. Not applied with KeyByIP (gates are then per address).
	MaxConcurrency int
	// Robots says whether the host's robots.txt is obeyed; RobotsIgnored is for a host the
	// user owns: robots.txt is neither fetched nor applied, Crawl-delay included.
	Robots RobotsRule
}

// RobotsRule says whether a host's robots.txt is obeyed.
type RobotsRule int

const (
	RobotsObeyed  RobotsRule = iota // fetched and applied, as RFC 9309 says
	RobotsIgnored                   // neither fetched nor applied
)
