package crawler

import (
	"sync"

	"github.com/crawl-project/crawl/internal/sitemap"
)

// Sitemap budgets, per host and per run. A host's sitemaps may list millions of URLs, and an
// index may list indexes without end: these bound what one host's sitemaps cost the crawl
// (docs/guarantees.md). Config.Sitemap may set others.
const (
	// defaultSitemapDocs is how many sitemap documents of one host are read: those queued
	// from its robots.txt (and /sitemap.xml) and from its indexes, and any other body that
	// turns out to be a sitemap.
	defaultSitemapDocs = 50
	// defaultSitemapURLs is how many entries of one host's urlsets are taken.
	defaultSitemapURLs = 100_000
	// maxSitemapNesting is how many index hops below a sitemap robots.txt names (or
	// /sitemap.xml) are read: the sitemaps an index at this level lists are not.
	maxSitemapNesting = 2
)

// SitemapLimits bounds what one host's sitemaps add to a run; a field of 0 or less means its
// default. They are no flags: the defaults bound the store (tests set smaller ones).
type SitemapLimits struct {
	Docs    int // sitemap documents read per host: defaultSitemapDocs
	URLs    int // urlset entries taken per host: defaultSitemapURLs
	Nesting int // index levels read below the sitemaps robots.txt names: maxSitemapNesting
}

// orDefaults returns l with its unset fields set to the defaults.
func (l SitemapLimits) orDefaults() SitemapLimits {
	if l.Docs <= 0 {
		l.Docs = defaultSitemapDocs
	}
	if l.URLs <= 0 {
		l.URLs = defaultSitemapURLs
	}
	if l.Nesting <= 0 {
		l.Nesting = maxSitemapNesting
	}
	return l
}

// ReasonSitemapBudget is the exclusion reason of the part of a sitemap left unread because a
// sitemap budget was spent, recorded once per sitemap with the count in its detail.
const ReasonSitemapBudget = "sitemap-budget"

// sitemapBudget is what the hosts' sitemaps spent in this run, and the nesting level of the
// sitemaps queued and not yet read. It is safe for concurrent use. Its memory is bounded by
// lim.Docs per host whose sitemaps are read.
type sitemapBudget struct {
	lim   SitemapLimits // set by Open
	mu    sync.Mutex
	spent map[string]*sitemapSpend // by host key
	level map[string]int           // sitemaps queued in this run, by URL: their nesting level
}

type sitemapSpend struct{ docs, urls int }

// spendLocked returns what host spent; b.mu must be held.
func (b *sitemapBudget) spendLocked(host string) *sitemapSpend {
	b.initLocked()
	s := b.spent[host]
	if s == nil {
		s = &sitemapSpend{}
		b.spent[host] = s
	}
	return s
}

func (b *sitemapBudget) initLocked() {
	if b.spent == nil {
		b.spent, b.level = map[string]*sitemapSpend{}, map[string]int{}
	}
}

// reserveDocs spends up to n documents of host's budget, for sitemaps to queue, and returns
// how many it spent.
func (b *sitemapBudget) reserveDocs(host string, n int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.spendLocked(host)
	n = max(min(n, b.lim.Docs-s.docs), 0)
	s.docs += n
	return n
}

// refund gives n unused documents (an index's) or URLs (a urlset's) back to host's budget.
func (b *sitemapBudget) refund(host string, kind sitemap.Kind, n int) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.spendLocked(host)
	if kind == sitemap.Index {
		s.docs -= n
	} else {
		s.urls -= n
	}
}

// queued notes the nesting level of a sitemap queued with a document reserved for it.
func (b *sitemapBudget) queued(url string, level int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.initLocked()
	b.level[url] = level
}

// read is called when the sitemap url of host is read: it returns the sitemap's nesting level
// (0 for one this run did not queue: found by a link, or queued by an earlier run, which is
// charged to host's document budget now) and whether the budget allows reading it.
func (b *sitemapBudget) read(host, url string) (level int, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.spendLocked(host)
	if level, queued := b.level[url]; queued {
		delete(b.level, url)
		return level, true
	}
	if s.docs >= b.lim.Docs {
		return 0, false
	}
	s.docs++
	return 0, true
}

// takeURLs returns how many of n urlset entries of host its URL budget allows, and spends them.
func (b *sitemapBudget) takeURLs(host string, n int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.spendLocked(host)
	n = max(min(n, b.lim.URLs-s.urls), 0)
	s.urls += n
	return n
}

// Requisite budgets. A requisite's requisites are requisites too (a stylesheet's @imports,
// fonts and images; the scripts, stylesheets and images of an HTML document fetched as a
// requisite), so a stylesheet that imports a new one without end, or a document that embeds a
// new one, would be followed without end, whatever --max-depth and --max-pages say: these
// bound it.
const (
	// maxRequisiteHops is how far from its page a requisite may be: a page's own requisites
	// are 1 hop away, what a requisite at n hops loads is at n+1.
	maxRequisiteHops = 5
	// requisiteBudgetPerPage is how many requisites a run takes from requisites, per page the
	// run fetched (for at least one page).
	requisiteBudgetPerPage = 100
)

// ReasonRequisiteBudget is the exclusion reason of the requisites of a requisite left out
// because the run's budget of requisites from requisites was spent, recorded once per
// requisite with the count in its detail.
const ReasonRequisiteBudget = "requisite-budget"

// requisiteChains counts what the run took from requisites, and keeps the hops of the
// requisites it queued from them until they are fetched. It is safe for concurrent use; its
// memory is bounded by the budget.
type requisiteChains struct {
	mu    sync.Mutex
	hops  map[string]int // requisites queued from a requisite in this run, by URL
	taken int            // requisites taken from requisites in this run
	pages int            // pages fetched in this run
}

// hopsOf returns how many hops the requisite url is from its page: as noted when it was
// queued from a requisite in this run, else 1 (a page's own, or queued by an earlier run).
func (r *requisiteChains) hopsOf(url string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h, ok := r.hops[url]; ok {
		return h
	}
	return 1
}

// take spends up to n of the run's budget of requisites from requisites and returns how many
// it spent.
func (r *requisiteChains) take(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n = max(min(n, requisiteBudgetPerPage*max(r.pages, 1)-r.taken), 0)
	r.taken += n
	return n
}

// queued notes the hops of a requisite queued from a requisite.
func (r *requisiteChains) queued(url string, hops int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hops == nil {
		r.hops = map[string]int{}
	}
	r.hops[url] = hops
}

// fetched is called when a URL of role requisite (isRequisite) or page was fetched and stored:
// a page widens the budget, a requisite's hops are no longer needed.
func (r *requisiteChains) fetched(url string, isRequisite bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if isRequisite {
		delete(r.hops, url)
	} else {
		r.pages++
	}
}

// redirected gives a requisite's redirect target the requisite's hops.
func (r *requisiteChains) redirected(from, to string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h, ok := r.hops[from]; ok {
		r.hops[to] = h
	}
}
