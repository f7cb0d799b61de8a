package crawler

import (
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/urlnorm"
)

// requisites sorts what the page or stylesheet of lease l needs to be shown into res, when
// --requisites is set: each is a URL of role RoleRequisite at l's depth (a requisite is no link
// hop), through the requisite scope, filters and robots.txt like a link, and fetched through
// its host's gate like any URL. Unusable references are recorded as links' are. A
// requisite's own requisites are taken too: what a stylesheet loads, and what an HTML document
// fetched as a requisite (an <object>, an <embed>, a mistyped <img>) needs to be shown; never
// its links. What requisites load is bounded (budgets.go): a requisite more than
// maxRequisiteHops from its page is excluded as "limit", and past the run's budget of
// requisites from requisites the rest of a requisite's are recorded once, as
// ReasonRequisiteBudget with their count.
func (c *Crawler) requisites(res *frontier.Result, l frontier.Lease, u *url.URL, resp *fetch.Response) {
	if !c.cfg.Requisites {
		return
	}
	found := fetch.ExtractRequisites(u, resp.ContentType, resp.Body)
	links, hops := found.Links, 1
	if l.Role == frontier.RoleRequisite {
		hops = c.chains.hopsOf(l.URL) + 1
		if take := c.chains.take(len(links)); take < len(links) {
			res.Excluded = append(res.Excluded, frontier.Exclusion{
				Entry:  frontier.Entry{URL: l.URL + " (requisites over the budget)", Host: l.Host, Depth: l.Depth, Parent: l.URL, Role: frontier.RoleRequisite},
				Reason: ReasonRequisiteBudget,
				Detail: fmt.Sprintf("requisite %s: %d of its %d requisites not taken: the run's budget of %d requisites from requisites per page fetched was spent",
					l.URL, len(links)-take, len(links), requisiteBudgetPerPage),
			})
			links = links[:take]
		}
	}
	for _, lk := range links {
		lk.URL.User = nil
		e := frontier.Entry{URL: lk.URL.String(), Host: urlnorm.HostKey(lk.URL), Depth: l.Depth, Parent: l.URL,
			Role: frontier.RoleRequisite}
		if hops > maxRequisiteHops {
			res.Excluded = append(res.Excluded, frontier.Exclusion{Entry: e, Reason: frontier.ReasonLimit,
				Detail: fmt.Sprintf("more than %d requisite hops from its page (a requisite's, %d deep)", maxRequisiteHops, hops)})
			continue
		}
		n := len(res.Links)
		c.consider(res, e, lk.URL, false)
		if hops > 1 && len(res.Links) > n {
			c.chains.queued(e.URL, hops)
		}
	}
	for _, sk := range found.Skipped {
		if !hasScheme(sk.Ref, "data") { // inline images and fonts need no fetch
			unusable(res, l.URL, sk.Ref, sk.Err, l.Depth, 0)
		}
	}
}

// hasScheme reports whether ref starts with scheme and a colon, in any case, after leading
// spaces.
func hasScheme(ref, scheme string) bool {
	ref = strings.TrimLeft(ref, " \t\n\r\f")
	return len(ref) > len(scheme) && ref[len(scheme)] == ':' && strings.EqualFold(ref[:len(scheme)], scheme)
}

// pageBudget applies --max-pages to pages alone when --requisites is set, so that a budget of
// N pages gives N pages that can be shown offline: a requisite is not counted, and once N pages
// are fetched the pages still queued are set aside (excluded with reason "limit", which a later
// run with a larger --max-pages queues again) and the run goes on to fetch the requisites of
// the pages it fetched, and what those requisites load, and no more. Without --requisites
// every fetch counts and the run stops at the budget, the rest left queued; so it does with a
// frontier that cannot be walked and revised (one shared by a fleet of crawlers).
type pageBudget struct {
	mode       budgetMode   // set by countRequisites before Run starts; then only the dispatcher changes it
	fr         Revisable    // with budgetPages and budgetSpent
	requisites atomic.Int64 // requisites fetched, all runs together: counted by countRequisites, then as they are stored
}

// budgetMode is how --max-pages counts.
type budgetMode uint8

const (
	budgetAll   budgetMode = iota // every fetch counts; at the budget the run stops
	budgetPages                   // pages count, requisites do not
	budgetSpent                   // the pages are spent and the queued ones set aside: requisites only
)

// countRequisites sets how --max-pages counts in this run and counts the requisites fetched by
// earlier runs when they are left out. It is called by Run before it starts.
func (c *Crawler) countRequisites() error {
	c.pages.requisites.Store(0)
	c.pages.mode, c.pages.fr = budgetAll, nil
	fr, ok := c.fr.(Revisable)
	if c.cfg.MaxPages <= 0 || !c.cfg.Requisites || !ok {
		return nil
	}
	c.pages.mode, c.pages.fr = budgetPages, fr
	return fr.Walk(func(r frontier.URLRecord) error {
		if r.State == "fetched" && r.Role == frontier.RoleRequisite {
			c.pages.requisites.Add(1)
		}
		return nil
	})
}

// countsAgainstBudget reports whether fetching the URL of lease l counts against --max-pages.
func (c *Crawler) countsAgainstBudget(l frontier.Lease) bool {
	return c.pages.fr == nil || l.Role != frontier.RoleRequisite
}

// pagesFetched is how many fetched URLs count against --max-pages, never fewer than were
// committed: it reads the requisites first, each of which was committed (and is in Counts)
// before stored counted it, so a requisite stored between the two reads can only make the
// figure higher, never lower.
func (c *Crawler) pagesFetched() int {
	req := int(c.pages.requisites.Load())
	return c.fr.Counts().Fetched - req
}

// stored notes that the result res of lease l was committed.
func (c *Crawler) stored(l frontier.Lease, res frontier.Result) {
	if res.Kind == frontier.Fetched && !c.countsAgainstBudget(l) {
		c.pages.requisites.Add(1)
	}
	if res.Kind == frontier.Fetched {
		c.chains.fetched(l.URL, l.Role == frontier.RoleRequisite)
	}
}

// spendPageBudget sets the pages still queued aside once the page budget is spent, so that the
// queued requisites can be leased, and reports whether it did (once per run, in budgetPages
// mode). No URL may be leased meanwhile.
func (c *Crawler) spendPageBudget() (bool, error) {
	if c.pages.mode != budgetPages {
		return false, nil
	}
	c.pages.mode = budgetSpent
	detail := fmt.Sprintf("--max-pages %d reached", c.cfg.MaxPages)
	_, err := c.pages.fr.Revise(func(r frontier.URLRecord) frontier.Verdict {
		if r.State == "queued" && r.Role != frontier.RoleRequisite {
			return frontier.Verdict{Action: frontier.Exclude, Reason: frontier.ReasonLimit, Detail: detail}
		}
		return frontier.Verdict{}
	})
	return true, err
}
