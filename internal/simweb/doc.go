// Package simweb serves a simulated multi-host web on loopback, for integration tests,
// benchmarks and `crawl demo`. Its one job is to behave like a set of small, differently
// tempered web servers and to count, honestly, how a client treated each of them.
//
// # What it simulates
//
// Start binds one net.Listener per HostSpec on loopback (127.0.0.1 with a distinct port per host;
// with Options.LoopbackIPs, 127.0.0.2, 127.0.0.3, … falling back to 127.0.0.1 when an address
// cannot be bound). Each host serves:
//
//   - Pages HTML pages: "/" and "/p1" … "/p<Pages-1>". Page i links to 2i+1 and 2i+2, so every
//     page is reachable from "/", plus a home link, a back link to its parent and a few seeded
//     random links. Links mix relative ("p12", "./p12", "../p12"), root-relative ("/p12") and
//     absolute forms; some carry a #fragment and some are repeated, so a crawler must
//     normalize to avoid duplicates. Every page has a <title> and 1–4 KB of text.
//   - For each Disallow prefix, a few extra pages under it ("/private/x1" …), linked from
//     ordinary pages, so a robots.txt violation is always possible and always detected.
//   - Links to the roots and pages of the hosts named in CrossLinks (absolute URLs).
//   - /robots.txt with a "User-agent: *" group holding the Disallow rules, or RobotsStatus.
//   - With HostSpec.Revisions, pages that send ETag, Last-Modified, both or neither, answer a
//     matching conditional GET with 304, and change when Web.Change gives them a new revision.
//   - HostSpec.Extra handlers at their exact paths; everything else is 404.
//
// Every request, robots.txt included, first meets a server-side token bucket
// (golang.org/x/time/rate, evaluated at arrival with the injected clock). Over-limit requests
// are answered per ReplyStyle: 429 with Retry-After in seconds, 429 with Retry-After as an
// HTTP-date (plus a Date header), a bare 429, or 503 with Retry-After. The announced wait is
// the time until the bucket would hold a token, rounded up to whole seconds (at least 1); with
// the date style the announced instant is that time rounded up to the next whole second.
// LimitDrop divides the rate mid-crawl; BanAfter answers 403 to every request once a client
// keeps pushing; Workers and Service model a server with a fixed worker pool, where excess
// concurrency shows up as queueing latency instead of errors.
//
// # Broad webs
//
// With Options.VirtualHosts one listener on 127.0.0.1 serves every host, told apart by the Host
// header, so a web of thousands to MaxVirtualHosts hosts costs one open file instead of one per
// host. Broad builds such a web: hosts named "h00042.broad.test", each with its own token
// bucket, robots.txt and a few pages, cross-linked so that hosts are found by links and not only
// from seeds. A client resolves the names to 127.0.0.1 (internal/dnstest serves them) or dials
// Web.Addr. Such a web keeps each page's links but not its text: pages are rendered per request
// (about 25 µs each), so 100,000 hosts of 2 pages take about 300 MB instead of over 1 GB.
//
// # What it counts
//
// HostStats, per host: requests by kind, 200s per URL (so "every page exactly once" is
// checkable against Expected), duplicates, 429/503 answers, requests that arrived before a
// Retry-After deadline the server had announced (a polite client scores 0; Options.Grace
// forgives requests already in flight when a window opened), requests to paths
// robots.txt disallows, page requests made before robots.txt was served, peak concurrency, bans,
// and handler latency percentiles including queueing. The simulation treats all requests to one
// host as coming from one client. Arrivals counts the requests reaching any host in each second,
// so the seconds a client left the whole web alone show.
//
// Expected returns, per host, the URLs a perfect polite crawl seeded with Seeds would store:
// pages reachable from the roots through links, never passing through a page robots.txt
// disallows (a robots.txt answered 4xx allows everything, 5xx disallows everything, as RFC
// 9309 says).
//
// # Why written by hand
//
// Nothing off the shelf simulates rate-limited hosts and also keeps the accounting a politeness
// test needs (announced deadlines per client, strikes, duplicates); net/http/httptest gives only
// the listener. Rate limiting itself is golang.org/x/time/rate. Holding Service time uses a
// timer: this is a server standing in for real work, not decision code.
//
// Content is deterministic for a given Options.Seed (apart from the port numbers in absolute
// URLs). A Web is safe for concurrent use by multiple goroutines.
package simweb
