package simweb

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Small returns three fast hosts of 20 pages for unit and integration tests: "a" (unlimited,
// Disallow /private/), "b" (50 req/s, burst 5, 429 with Retry-After seconds) and "c"
// (unlimited, two workers at 1 ms, robots.txt 404), cross-linked a→b→c→a.
func Small() []HostSpec {
	return []HostSpec{
		{Name: "a", Pages: 20, Disallow: []string{"/private/"}, CrossLinks: []string{"b"}},
		{Name: "b", Pages: 20, Limit: 50, Burst: 5, Reply: Reply429Seconds, CrossLinks: []string{"c"}},
		{Name: "c", Pages: 20, Workers: 2, Service: time.Millisecond, RobotsStatus: 404,
			CrossLinks: []string{"a"}},
	}
}

// DemoWeb returns the five hosts of `crawl demo`: mixed hidden limits (4, 8, 20, 50 req/s and
// one unlimited host with two workers), every reply style but the bare 429, Disallow rules on
// "shop", and cross-links so one seed reaches all. At the hidden limits the slowest host needs
// about 10 s.
func DemoWeb() []HostSpec {
	return []HostSpec{
		{Name: "news", Pages: 80, Limit: 20, Burst: 3, Reply: Reply429Seconds,
			CrossLinks: []string{"shop", "blog"}},
		{Name: "shop", Pages: 60, Limit: 8, Burst: 2, Reply: Reply429Date,
			Disallow: []string{"/cart/", "/account/"}, CrossLinks: []string{"news"}},
		{Name: "blog", Pages: 50, Workers: 2, Service: 15 * time.Millisecond,
			CrossLinks: []string{"docs"}},
		{Name: "docs", Pages: 70, Limit: 50, Burst: 5, Reply: Reply503RetryAfter,
			CrossLinks: []string{"wiki"}},
		{Name: "wiki", Pages: 40, Limit: 4, Burst: 1, Reply: Reply429Seconds,
			CrossLinks: []string{"news"}},
	}
}

// PolitenessBench returns the politeness benchmark: hosts with different hidden limits and each
// reply style; "drop", whose limit falls 4x five seconds in; "workers", with four workers at
// 50 ms and no 429 at all; "banhammer", which bans a client after 10 strikes; "burst", 1,000
// pages at 50 req/s; and two unlimited hosts, "free1" (Disallow /private/) and "free2"
// (Disallow /p9, a prefix that also covers /p90…/p99 and /p900…). Hosts are cross-linked in a
// ring. The slowest hosts need about 25 s at their hidden limits (see IdealMakespan).
func PolitenessBench() []HostSpec {
	return []HostSpec{
		{Name: "sec429", Pages: 150, Limit: 10, Burst: 2, Reply: Reply429Seconds,
			CrossLinks: []string{"date429"}},
		{Name: "date429", Pages: 150, Limit: 10, Burst: 2, Reply: Reply429Date,
			CrossLinks: []string{"bare429"}},
		{Name: "bare429", Pages: 100, Limit: 8, Burst: 1, Reply: Reply429Bare,
			CrossLinks: []string{"svc503"}},
		{Name: "svc503", Pages: 150, Limit: 10, Burst: 3, Reply: Reply503RetryAfter,
			CrossLinks: []string{"drop"}},
		{Name: "drop", Pages: 200, Limit: 20, Burst: 2, Reply: Reply429Seconds,
			LimitDrop:  &LimitChange{After: 5 * time.Second, Factor: 0.25},
			CrossLinks: []string{"workers"}},
		{Name: "workers", Pages: 300, Workers: 4, Service: 50 * time.Millisecond,
			CrossLinks: []string{"banhammer"}},
		{Name: "banhammer", Pages: 150, Limit: 10, Burst: 2, Reply: Reply429Seconds, BanAfter: 10,
			CrossLinks: []string{"burst"}},
		{Name: "burst", Pages: 1000, Limit: 50, Burst: 5, Reply: Reply429Seconds,
			CrossLinks: []string{"free1"}},
		{Name: "free1", Pages: 200, Disallow: []string{"/private/"}, CrossLinks: []string{"free2"}},
		{Name: "free2", Pages: 200, Disallow: []string{"/p9"}, CrossLinks: []string{"sec429"}},
	}
}

// StatedBench returns hosts that state their limits on every answer: two token buckets with
// the IETF draft's headers (q per 10 s), two with X-RateLimit-* (3000 or 600 per minute, the
// window told only by the reset, a Unix time) and a fixed window of 50 requests per 10 s with
// the IETF headers. Cross-linked in a ring; the slowest host needs 30 s at its limit.
func StatedBench() []HostSpec {
	return []HostSpec{
		{Name: "ietf20", Pages: 300, Limit: 20, Burst: 5, Reply: Reply429Seconds,
			Headers: HeadersIETF, PolicyWindow: 10 * time.Second, CrossLinks: []string{"ietf5"}},
		{Name: "ietf5", Pages: 100, Limit: 5, Burst: 2, Reply: Reply429Seconds,
			Headers: HeadersIETF, PolicyWindow: 10 * time.Second, CrossLinks: []string{"x50"}},
		{Name: "x50", Pages: 600, Limit: 50, Burst: 10, Reply: Reply429Seconds,
			Headers: HeadersX, PolicyWindow: time.Minute, CrossLinks: []string{"x10"}},
		{Name: "x10", Pages: 200, Limit: 10, Burst: 1, Reply: Reply429Seconds,
			Headers: HeadersX, PolicyWindow: time.Minute, CrossLinks: []string{"fixed5"}},
		{Name: "fixed5", Pages: 150, Limit: 5, FixedWindow: 10 * time.Second, Reply: Reply429Seconds,
			Headers: HeadersIETF, PolicyWindow: 10 * time.Second, CrossLinks: []string{"ietf20"}},
	}
}

// StatedNoWindowBench returns limiters that state a limit but not its window, as API gateways'
// X-RateLimit-* headers do, each three times: with the reset as delta seconds (HeadersXDelta,
// "-delta"), as a Unix time (HeadersXUnix, "-unix"), and stating nothing ("-none"). The
// limiters: token buckets of 10 req/s burst 1 and 50 req/s burst 10, their limits stated per
// minute (600 and 3000), and fixed windows of 600 per minute and 100 per 10 s, each window
// starting at the first request after the last one ended. Refusals are 429 with Retry-After
// in seconds. Cross-linked in a ring; each host needs 120 s at its limit, long enough that
// the cost of discovering a limit (a few seconds, with or without the headers) weighs little.
func StatedNoWindowBench() []HostSpec {
	kinds := []HostSpec{
		{Name: "bucket10", Pages: 1200, Limit: 10, Burst: 1, PolicyWindow: time.Minute},
		{Name: "bucket50", Pages: 6000, Limit: 50, Burst: 10, PolicyWindow: time.Minute},
		{Name: "win600m", Pages: 1200, Limit: 10, FixedWindow: time.Minute, PolicyWindow: time.Minute},
		{Name: "win100s", Pages: 1200, Limit: 10, FixedWindow: 10 * time.Second, PolicyWindow: 10 * time.Second},
	}
	var specs []HostSpec
	for _, k := range kinds {
		for _, f := range []struct {
			suffix string
			style  HeaderStyle
		}{{"-delta", HeadersXDelta}, {"-unix", HeadersXUnix}, {"-none", HeadersNone}} {
			sp := k
			sp.Name, sp.Headers, sp.Reply = k.Name+f.suffix, f.style, Reply429Seconds
			if f.style == HeadersNone {
				sp.PolicyWindow = 0
			}
			specs = append(specs, sp)
		}
	}
	for i := range specs {
		specs[i].CrossLinks = []string{specs[(i+1)%len(specs)].Name}
	}
	return specs
}

// BroadDomain is the domain Broad names its hosts under. ".test" is reserved (RFC 6761): no real
// host has such a name, so a crawl of it never leaves the simulated web.
const BroadDomain = "broad.test"

// broadLinks is how many hosts, besides the next one, each host of Broad links to.
const broadLinks = 3

// Broad returns a broad web of n hosts (1 to MaxVirtualHosts), to serve with
// Options.VirtualHosts. Host i is named "h00042.broad.test" (i in five digits, more when n needs
// them) and has pages pages, a robots.txt allowing everything, and a token bucket of limit req/s
// with burst 1 answering 429 with Retry-After in seconds (limit 0: unlimited). Each host
// cross-links to the next (the hosts form a ring, so any one root reaches them all) and to
// broadLinks others drawn from seed: from its root to theirs, and from about one page in ten to
// one of their pages. Broad panics if n or pages is out of range.
func Broad(n, pages int, limit float64, seed int64) []HostSpec {
	if n < 1 || n > MaxVirtualHosts || pages < 1 {
		panic(fmt.Sprintf("simweb.Broad(%d, %d): want 1 to %d hosts of at least one page", n, pages, MaxVirtualHosts))
	}
	width := max(5, len(fmt.Sprint(n-1)))
	name := func(i int) string { return fmt.Sprintf("h%0*d.%s", width, i, BroadDomain) }
	rng := rand.New(rand.NewPCG(uint64(seed), 0xb10ad))
	specs := make([]HostSpec, n)
	for i := range specs {
		specs[i] = HostSpec{Name: name(i), Pages: pages, Limit: limit, Burst: 1, Reply: Reply429Seconds}
		if n == 1 {
			continue
		}
		links := []int{(i + 1) % n}
		for range min(broadLinks, n-2) {
			for {
				j := rng.IntN(n)
				if j != i && !slices.Contains(links, j) {
					links = append(links, j)
					break
				}
			}
		}
		for _, j := range links {
			specs[i].CrossLinks = append(specs[i].CrossLinks, name(j))
		}
	}
	return specs
}

// IdealMakespan returns the least time a crawler needs to fetch spec.Pages pages from the host
// without exceeding its hidden capacity: Pages/Limit for a rate-limited host (following
// LimitDrop), Pages·Service/Workers for a worker pool, the larger of the two when both apply,
// and 0 for an unlimited host or one whose robots.txt answers 5xx. The first request and the
// bucket's burst are ignored.
func IdealMakespan(spec HostSpec) time.Duration {
	if spec.robotsStatus() >= 500 {
		return 0
	}
	pages := float64(spec.Pages)
	var secs float64
	if spec.Limit > 0 {
		secs = pages / spec.Limit
		if d := spec.LimitDrop; d != nil && d.Factor > 0 && secs > d.After.Seconds() {
			before := spec.Limit * d.After.Seconds()
			secs = d.After.Seconds() + (pages-before)/(spec.Limit*d.Factor)
		}
	}
	if spec.Workers > 0 && spec.Service > 0 {
		secs = math.Max(secs, pages*spec.Service.Seconds()/float64(spec.Workers))
	}
	return time.Duration(secs * float64(time.Second))
}
