package simweb

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// ReplyStyle is how a host answers a request that finds its token bucket empty.
type ReplyStyle int

const (
	// Reply429Seconds answers 429 with "Retry-After: N" (whole seconds, N >= 1).
	Reply429Seconds ReplyStyle = iota
	// Reply429Date answers 429 with Retry-After as an HTTP-date and a Date header from the clock.
	Reply429Date
	// Reply429Bare answers 429 without Retry-After.
	Reply429Bare
	// Reply503RetryAfter answers 503 with "Retry-After: N" (whole seconds, N >= 1).
	Reply503RetryAfter
)

// String returns a short name for the style, e.g. "429+seconds".
func (s ReplyStyle) String() string {
	switch s {
	case Reply429Seconds:
		return "429+seconds"
	case Reply429Date:
		return "429+date"
	case Reply429Bare:
		return "429"
	case Reply503RetryAfter:
		return "503+seconds"
	}
	return fmt.Sprintf("ReplyStyle(%d)", int(s))
}

// announces reports whether the style tells the client when to come back.
func (s ReplyStyle) announces() bool { return s != Reply429Bare }

// LimitChange multiplies a host's rate by Factor once After has passed since the host's first
// request (as measured by the Web's clock, at the arrival of a later request).
type LimitChange struct {
	After  time.Duration
	Factor float64 // > 0; 0.25 divides the limit by 4
}

// HostSpec is the hidden behaviour of one simulated host. The zero value of every field other
// than Name and Pages means "off".
type HostSpec struct {
	Name  string // label used by URL, Stats and Expected; unique, non-empty
	Pages int    // ordinary HTML pages, "/" included (>= 1)
	// TextSize is about how many bytes of text each page carries, besides its markup and
	// links; 0 draws 1,000–4,000 per page at random.
	TextSize int
	// Links > 0 gives each ordinary page Links links in all: its own (as without Links) and
	// random ones to the host's ordinary pages to make up the figure. The random ones are drawn
	// again at each request from the page's seed, never kept, and the pages of a Web with such
	// a host are rendered per request (as with VirtualHosts), so a host of a million pages with
	// 150 links each fits in memory. Expected is unchanged: every page is reachable without them.
	Links int

	Limit float64    // token-bucket rate in req/s; 0 = unlimited
	Burst int        // bucket size; 0 = 1
	Reply ReplyStyle // answer to over-limit requests

	// FixedWindow > 0 makes the limit a fixed window instead of a token bucket: each window
	// admits Limit·FixedWindow requests (at least one) and begins at the first request after
	// the previous one ended; Burst is not used. A refusal's Retry-After is the window's end.
	FixedWindow time.Duration
	// Headers makes the host state its limit on every answer but a ban (stated.go); it
	// requires Limit > 0 and PolicyWindow, the window its quota is stated per (whole seconds).
	Headers      HeaderStyle
	PolicyWindow time.Duration

	Workers int           // > 0: admitted requests queue for one of Workers slots
	Service time.Duration // time each admitted request holds (a slot, if Workers > 0)

	LimitDrop *LimitChange // optional mid-crawl change of Limit (requires Limit > 0)

	// BanAfter > 0: once the client has more than BanAfter strikes, every later request is
	// answered 403. A strike is a request counted in InRetryAfter (see Options.Grace) or, for
	// Reply429Bare (which announces nothing), a request refused as over limit.
	BanAfter int

	// Evasive > 0 blocks the way Apache's mod_evasive does (DOSSiteCount, DOSSiteInterval,
	// DOSBlockingPeriod): a client that sends more than Evasive requests within EvasiveWindow
	// is answered 403 to everything until EvasiveBlock has passed without a request from it;
	// each request during the block starts it again. Nothing is announced: no 429, no
	// Retry-After. Counted in HostStats.Blocked.
	Evasive       int
	EvasiveWindow time.Duration
	EvasiveBlock  time.Duration

	// Flaky is the share of admitted page requests (not /robots.txt) answered FlakyStatus
	// (default 502 Bad Gateway) at random, whatever the load: a flaky backend, one bad node
	// behind a load balancer (a proxy with no live upstream answers 503). The draws come from
	// Options.Seed. Counted in HostStats.Flaky.
	Flaky       float64
	FlakyStatus int // a 5xx status; 0 = 502

	// Disallow lists plain path prefixes ("/private/") for "User-agent: *". Pages under each exist
	// and are linked to. Wildcards ('*', '$') are not supported.
	Disallow []string
	// RobotsStatus is the status of /robots.txt: 0 or 200 serve the rules; 4xx (allow all) or 5xx
	// (disallow all, per RFC 9309) serve an error instead.
	RobotsStatus int
	// RobotsFailures > 0: the first RobotsFailures admitted /robots.txt requests answer 503
	// (unreachable: disallow all) before the host serves RobotsStatus as usual — a robots.txt
	// that recovers.
	RobotsFailures int

	// RefuseFirst refuses the host's first page request (its first request other than
	// /robots.txt, banned or blocked ones aside) as over limit, answered as Reply says (429
	// with "Retry-After: 1", …) whatever the bucket holds and without taking a token; later
	// requests are admitted as usual. Every client meets one refusal per host, as a host whose
	// limit a first burst exceeds. Counted in OverLimit; it opens a Retry-After window like any
	// refusal.
	RefuseFirst bool

	CrossLinks []string // names of other hosts this host's pages link to

	// Assets makes every page link a stylesheet (with a query, importing a second one and
	// loading a background image), an icon, an image with a srcset, a redirect and a missing
	// page, all served by the host (assets.go names the paths). They are not part of Expected.
	Assets bool

	// Sitemaps makes the host serve sitemaps (sitemaps.go names the paths): robots.txt names
	// one, /sitemap.xml is an index of a gzip-compressed one and a broken one, and each lists a
	// page nothing links to. They are not part of Expected.
	Sitemaps bool

	// Revisions makes the ordinary pages revalidatable and changeable: page i sends the
	// validators ValidatorsOf(i) names (revisions.go), answers a conditional GET that matches its
	// current revision with 304 Not Modified, and gets a new revision (body, ETag,
	// Last-Modified) from Web.Change.
	Revisions bool

	// Extra serves custom exact paths (not "/robots.txt", not a page path). Requests to them pass
	// through the same bucket, worker pool and counters, whatever their method (the handler
	// answers each); 2xx answers count as OK. They are not
	// linked from pages and are not part of Expected.
	Extra map[string]http.Handler
}

// Options configures Start. A nil *Options means the defaults.
type Options struct {
	Seed int64 // seeds the link graph and page text; 0 is a valid seed
	// Clock is read once at each request's arrival, for rate limiting, Retry-After deadlines,
	// the Date header and First/LastRequest. Nil means time.Now. Latency is always real time.
	Clock func() time.Time
	// LoopbackIPs binds host i to 127.0.0.(i+2) instead of 127.0.0.1, falling back to 127.0.0.1
	// for any address that cannot be bound. It does not apply with VirtualHosts.
	LoopbackIPs bool
	// VirtualHosts serves every host from one listener on 127.0.0.1, told apart by the Host
	// header, so that a web of up to MaxVirtualHosts hosts costs one open file: host URLs are
	// "http://NAME:PORT/…" with the spec's Name, which must then be a lowercase DNS name
	// ("h00042.broad.test"). Clients resolve every name to 127.0.0.1 (internal/dnstest answers
	// so) or dial Addr. A request naming no host of the Web is answered 421 and counted nowhere.
	// Without VirtualHosts each host has a listener of its own, and at most 250 hosts are
	// allowed.
	VirtualHosts bool
	// Grace forgives requests that arrive less than Grace after the refusal that opened a
	// Retry-After window (a refusal met outside any window): a client with several requests in
	// flight sent them before it could read that answer. They are still refused if the bucket is
	// empty, but are not counted in InRetryAfter nor as strikes. Refusals that themselves arrive
	// inside a window open nothing, so hammering is never forgiven. 0 counts exactly; for
	// real-clock crawls with per-host concurrency above 1, about 50ms is a fair value.
	Grace time.Duration
	// KernelArrival takes a request's arrival time (for everything Clock is read for) from the
	// kernel's receive time of its bytes (SO_TIMESTAMPNS, Linux only; elsewhere Clock), so that
	// the server's own lateness on a loaded machine (its handlers running late, requests
	// queued meanwhile seeming to arrive together) does not count against the client. Arrivals
	// are never taken as earlier than one the host already counted. It requires the real clock
	// (Clock nil).
	KernelArrival bool
}

// burst returns the effective bucket size.
func (s *HostSpec) burst() int {
	if s.Burst <= 0 {
		return 1
	}
	return s.Burst
}

// robotsStatus returns the effective /robots.txt status.
func (s *HostSpec) robotsStatus() int {
	if s.RobotsStatus == 0 {
		return http.StatusOK
	}
	return s.RobotsStatus
}

// MaxVirtualHosts is the most hosts a Web serves with Options.VirtualHosts.
const MaxVirtualHosts = 1_000_000

// validate checks every spec and the relations between them; virtual says the hosts share one
// listener (Options.VirtualHosts), so their names must be DNS names.
func validate(specs []HostSpec, virtual bool) error {
	if len(specs) == 0 {
		return fmt.Errorf("%w: no hosts", ErrBadSpec)
	}
	if limit := 250; !virtual && len(specs) > limit {
		return fmt.Errorf("%w: %d hosts, at most %d (or %d with VirtualHosts)", ErrBadSpec, len(specs), limit, MaxVirtualHosts)
	}
	if len(specs) > MaxVirtualHosts {
		return fmt.Errorf("%w: %d hosts, at most %d", ErrBadSpec, len(specs), MaxVirtualHosts)
	}
	names := make(map[string]bool, len(specs))
	for _, s := range specs {
		if s.Name == "" {
			return fmt.Errorf("%w: empty name", ErrBadSpec)
		}
		if names[s.Name] {
			return fmt.Errorf("%w: duplicate name %q", ErrBadSpec, s.Name)
		}
		if virtual && !dnsName(s.Name) {
			return fmt.Errorf("%w: name %q is not a lowercase DNS name (VirtualHosts)", ErrBadSpec, s.Name)
		}
		names[s.Name] = true
	}
	for _, s := range specs {
		if err := s.validate(names); err != nil {
			return fmt.Errorf("%w: host %q: %s", ErrBadSpec, s.Name, err)
		}
	}
	return nil
}

func (s *HostSpec) validate(names map[string]bool) error {
	switch {
	case s.Pages < 1:
		return fmt.Errorf("Pages %d < 1", s.Pages)
	case s.TextSize < 0:
		return fmt.Errorf("TextSize %d < 0", s.TextSize)
	case s.Links < 0:
		return fmt.Errorf("Links %d < 0", s.Links)
	case s.Limit < 0 || math.IsNaN(s.Limit) || math.IsInf(s.Limit, 0):
		return fmt.Errorf("Limit %v", s.Limit)
	case s.Burst < 0:
		return fmt.Errorf("Burst %d < 0", s.Burst)
	case s.FixedWindow < 0 || s.FixedWindow > 0 && s.Limit == 0:
		return fmt.Errorf("FixedWindow %v needs Limit > 0", s.FixedWindow)
	case s.Headers < HeadersNone || s.Headers > HeadersXUnix:
		return fmt.Errorf("unknown Headers %d", int(s.Headers))
	case s.Headers != HeadersNone && (s.Limit == 0 || s.PolicyWindow < time.Second || s.PolicyWindow%time.Second != 0):
		return fmt.Errorf("Headers need Limit > 0 and PolicyWindow of whole seconds, got %v", s.PolicyWindow)
	case s.Reply < Reply429Seconds || s.Reply > Reply503RetryAfter:
		return fmt.Errorf("unknown Reply %d", int(s.Reply))
	case s.Workers < 0:
		return fmt.Errorf("Workers %d < 0", s.Workers)
	case s.Service < 0:
		return fmt.Errorf("Service %v < 0", s.Service)
	case s.BanAfter < 0:
		return fmt.Errorf("BanAfter %d < 0", s.BanAfter)
	case !(s.Flaky >= 0 && s.Flaky < 1):
		return fmt.Errorf("Flaky %v: want a share in [0, 1)", s.Flaky)
	case s.FlakyStatus != 0 && (s.FlakyStatus < 500 || s.FlakyStatus > 599):
		return fmt.Errorf("FlakyStatus %d: want a 5xx status", s.FlakyStatus)
	}
	if d := s.LimitDrop; d != nil {
		if s.Limit == 0 || s.FixedWindow > 0 || d.After < 0 || !(d.Factor > 0) || math.IsInf(d.Factor, 0) {
			return fmt.Errorf("LimitDrop needs Limit > 0 (a bucket, not a FixedWindow), After >= 0, Factor > 0")
		}
	}
	st := s.RobotsStatus
	if st != 0 && (st < 200 || st > 299) && (st < 400 || st > 599) {
		return fmt.Errorf("RobotsStatus %d: want 0, 2xx, 4xx or 5xx", st)
	}
	for _, p := range s.Disallow {
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "*$#? \t\r\n\"<>") {
			return fmt.Errorf("Disallow %q: want a plain path prefix starting with /", p)
		}
	}
	for _, c := range s.CrossLinks {
		if c == s.Name || !names[c] {
			return fmt.Errorf("CrossLinks %q: not another host", c)
		}
	}
	for p, h := range s.Extra {
		if !strings.HasPrefix(p, "/") || p == "/robots.txt" || h == nil {
			return fmt.Errorf("Extra %q: want a path starting with / (not /robots.txt) and a handler", p)
		}
	}
	return nil
}

// dnsName reports whether s is a lowercase DNS host name without a trailing dot: labels of 1 to
// 63 letters, digits and inner hyphens, 253 bytes at most, not all digits (not an IPv4 address).
func dnsName(s string) bool {
	if len(s) > 253 {
		return false
	}
	digits := true
	for label := range strings.SplitSeq(s, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			switch {
			case r >= '0' && r <= '9':
			case r >= 'a' && r <= 'z', r == '-':
				digits = false
			default:
				return false
			}
		}
	}
	return !digits
}
