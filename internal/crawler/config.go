package crawler

import (
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

// Config is everything one crawl needs. It is built once (by cmd/crawl) and passed down; there
// are no other knobs, no environment variables and no globals.
type Config struct {
	Dir   string   // data directory holding the store
	Seeds []string // normalized seed URLs (may be empty when resuming)
	// HTTPFallback holds the host keys (urlnorm.HostKey) of seeds given without a scheme
	// (SeedAssumedHTTPS): when such a host's https cannot connect or handshake, its
	// robots.txt and pages are fetched over http instead, as browsers and wget do.
	HTTPFallback map[string]bool

	Scope    string // "host" or "domain"
	Include  []*regexp.Regexp
	Exclude  []*regexp.Regexp
	MaxDepth int // link hops from a seed; < 0 means unlimited
	MaxPages int // stop after this many fetched pages (all runs together); 0 means unlimited
	// MaxHostPages caps the URLs of one host ever queued (so fetched); further links to the host
	// are excluded with reason "limit". It bounds infinite URL spaces. 0 means unlimited.
	MaxHostPages int

	UserAgent string
	// RobotsAgent is the product token matched against robots.txt User-agent lines; ""
	// means the product of UserAgent (robots.AgentToken).
	RobotsAgent     string
	Workers         int           // global cap on requests in flight
	HostConcurrency int           // cap on requests in flight per host
	Timeout         time.Duration // per request, body included
	MaxBody         int64         // decoded bytes kept per response
	MaxRedirects    int           // redirect hops followed from one URL
	// Sitemaps queues each host's sitemaps (robots.txt Sitemap lines and /sitemap.xml) and
	// follows the URLs they list (--sitemaps).
	Sitemaps bool
	// Sitemap bounds what each host's sitemaps add to a run (budgets.go); zero: the defaults.
	Sitemap SitemapLimits

	InitialRate      float64 // per host, req/s, before anything is learned
	MinRate, MaxRate float64 // per-host floor and ceiling, req/s
	IgnoreCrawlDelay bool
	RobotsTTL        time.Duration
	// RobotsRetry is the first re-check delay after a host's robots.txt was unreachable; it
	// doubles with each failure up to a minute, and after robotsMaxFailures the host's URLs fail.
	RobotsRetry time.Duration

	Retry retry.Policy

	// AcceptTypes, if not empty, are the media types ("text/html", "text/*") of the pages kept:
	// a 2xx page of another type (by its Content-Type header) is excluded with reason "type"
	// without its body being read. robots.txt, and sitemaps with Sitemaps, are always read.
	AcceptTypes []string
	// DenyExt are file extensions (lowercase, no dot) whose URLs are excluded as "filter"
	// before they are requested.
	DenyExt []string

	// Hosts holds the policies set for particular hosts, by host key (--hosts-config).
	Hosts map[string]HostPolicy
	// HostsConfig is the file (an absolute path) Hosts was read from, "" if none: it is
	// stored with the settings, so that a resume reads it again.
	HostsConfig string

	// RetryFailed and RetryExcluded put the failed URLs, and the URLs excluded by robots.txt,
	// a private address or a setting that now admits them, back in the queue with fresh
	// attempts when the crawl opens (--retry failed,excluded).
	RetryFailed, RetryExcluded bool

	// Requisites fetches what each page needs to be shown (stylesheets, scripts, images,
	// icons, fonts, and what stylesheets load) as requisites of the page: at its depth, their
	// own links not followed (--requisites). RequisitesScope says on which hosts.
	Requisites      bool
	RequisitesScope string // RequisitesScopeAny (default) or RequisitesScopeHost

	// Recrawl queues the fetched URLs again when the crawl opens, to be revisited with
	// conditional GETs (--recrawl); with RecrawlOlderThan > 0 only those whose last visit is at
	// least that old (--older-than).
	Recrawl          bool
	RecrawlOlderThan time.Duration

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

	// Render is which pages are rendered in a headless browser, and how (renderconfig.go).
	Render Render

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

// Defaults returns a Config with every default filled in; callers override fields.
func Defaults() Config {
	return Config{
		Scope:           "host",
		RequisitesScope: RequisitesScopeAny,
		MaxDepth:        -1,
		UserAgent:       DefaultUserAgent,
		Workers:         32,
		HostConcurrency: 8,
		Timeout:         30 * time.Second,
		MaxBody:         10 << 20,
		MaxRedirects:    10,
		InitialRate:     2,
		MinRate:         0.1,
		MaxRate:         1000,
		RobotsTTL:       24 * time.Hour,
		RobotsRetry:     time.Second,
		Retry:           retry.Policy{Base: 500 * time.Millisecond, Cap: 60 * time.Second, MaxAttempts: 5},
		DeferAfter:      10 * time.Minute,
		Grace:           10 * time.Second,
		Render:          Render{Timeout: DefaultRenderTimeout},
		StatusEvery:     time.Second,
	}
}

// Values of Config.RequisitesScope (--requisites-scope).
const (
	RequisitesScopeAny  = "any"  // requisites on any host
	RequisitesScopeHost = "host" // only on the hosts (or domains) of the crawl's scope
)

// maxWorkers bounds --workers and --host-concurrency: far above what one process can use, low
// enough that what is sized by them stays small.
const maxWorkers = 100_000

func badRate(r float64) bool { return math.IsNaN(r) || math.IsInf(r, 0) }

// MinRobotsTTL is the shortest --robots-ttl: a host's pages wait while its robots.txt is
// fetched again, so a time-to-live shorter than a few fetches crawls nothing but robots.txt.
const MinRobotsTTL = time.Minute

// Validate reports the first impossible setting, naming the flag it comes from.
func (c *Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("--data is required")
	case c.Scope != "host" && c.Scope != "domain":
		return fmt.Errorf("--scope must be host or domain, not %q", c.Scope)
	case c.Workers < 1 || c.Workers > maxWorkers:
		return fmt.Errorf("--workers must be between 1 and %d, not %d", maxWorkers, c.Workers)
	case c.HostConcurrency < 1 || c.HostConcurrency > maxWorkers:
		return fmt.Errorf("--host-concurrency must be between 1 and %d, not %d", maxWorkers, c.HostConcurrency)
	case c.MaxDepth < -1:
		return fmt.Errorf("--max-depth must be -1 (unlimited) or more, not %d", c.MaxDepth)
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
	case c.RequisitesScope != RequisitesScopeAny && c.RequisitesScope != RequisitesScopeHost:
		return fmt.Errorf("--requisites-scope must be any or host, not %q", c.RequisitesScope)
	case c.RecrawlOlderThan < 0:
		return fmt.Errorf("--older-than must not be negative, not %v", c.RecrawlOlderThan)
	case c.RecrawlOlderThan > 0 && !c.Recrawl:
		return errors.New("--older-than needs --recrawl")
	case c.Retry.MaxAttempts < 1:
		return fmt.Errorf("--max-attempts must be at least 1, not %d", c.Retry.MaxAttempts)
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
