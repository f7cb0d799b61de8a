// Package crawler is the crawl loop: it ties the rooms together and owns nothing they own.
//
// One dispatcher goroutine (Run) asks the frontier which hosts have work ready, asks each host's
// gate (hostlimit) without blocking whether a request may go now, leases one URL and starts a
// job for it. A job makes exactly one request (fetch), reports the outcome to the host's gate,
// and commits the result through the frontier in one transaction: page stored, URL done, new
// links enqueued (or a retry scheduled, or a failure recorded); a page's links past 1,000 are
// recorded just before it, 1,000 a transaction (addahead.go). Redirect targets are enqueued as
// new URLs, so every hop passes scope, robots.txt, dedup and its own host's gate.
//
// robots.txt is fetched once per host before any page of it (through the same gate), cached in
// the store with a TTL, and checked again when a URL is leased. While a host's robots.txt is
// unreachable the host is not crawled; it is re-checked with backoff.
//
// What a server's content can add is bounded (budgets.go, docs/guarantees.md): per host, the
// sitemap documents read, the URLs taken from sitemaps and the nesting of indexes; per run, the
// hops of a chain of requisites and the requisites taken from requisites. What a budget cuts
// is recorded once per sitemap or requisite, with its count.
//
// Data flows one way: frontier → hostlimit → fetch → storage (via the frontier's commit) → links
// back to the frontier. The rooms never call each other; only this package calls them.
//
// The files follow the loop: crawler.go holds the Crawler, its fields grouped by the goroutine
// or lock that owns them; open.go opens a crawl (store, frontier, address guard, client);
// seeds.go and scope.go take its seeds and scope; run.go is Run's loop, dispatch.go one turn
// of the dispatcher, jobs.go the jobs it starts; robots.go, page.go and sitemap.go are what the
// jobs do.
//
// With --render a page's job also renders it (render.go) from the body it fetched, in one
// browser (internal/render); every request of the page is answered by the crawl
// (subresource.go): robots.txt, the address guard, the host's gate (a FIFO queue and one
// waiter per gate: subgate.go, whose ends wake the dispatcher: gatefreed.go; in a shared
// crawl, then the fleet's pace of that gate: fleetSlot), the client and the store. Its DOM's
// links are recorded as soon as it has them, before the page's commit (answerer.Early).
// docs/render-crawl.md has the design.
package crawler
