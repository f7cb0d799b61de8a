package crawler

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/sitemap"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/robots"
)

// discoverSitemaps queues the sitemaps of host when Config.Sitemaps is set: the Sitemap lines
// of its robots.txt and /sitemap.xml, as many as its sitemap document budget allows. They pass
// scope, filters and robots.txt like links and are then fetched like pages, through the host's
// gate; sitemapLinks reads them. A sitemap the settings refuse (out of scope, filtered,
// robots.txt) or that is not a usable URL is recorded as excluded, with its reason, like a
// link; a sitemap already seen is not queued again.
func (c *Crawler) discoverSitemaps(host, scheme string, rules *robots.Robots) {
	if !c.cfg.Sitemaps || rules == nil || rules.Unreachable() {
		return
	}
	base := &url.URL{Scheme: scheme, Host: host, Path: "/"}
	parent := base.String() + "robots.txt"
	refs := append(rules.Sitemaps(), "/sitemap.xml")
	if n := c.sitemaps.reserveDocs(host, len(refs)); n < len(refs) {
		c.log.Warn("sitemaps over the host's budget not read", "host", host, "sitemaps", len(refs)-n, "budget", c.sitemaps.lim.Docs)
		refs = refs[:n]
	}
	var res frontier.Result
	for _, ref := range refs {
		u, err := urlnorm.Resolve(base, ref)
		if err != nil {
			c.log.Warn("unusable sitemap in robots.txt", "host", host, "sitemap", ref, "err", err)
			unusable(&res, parent, ref, err, 0, 0)
			continue
		}
		u.User = nil
		c.consider(&res, frontier.Entry{URL: u.String(), Host: urlnorm.HostKey(u), Parent: parent}, u, false)
	}
	for _, e := range res.Links {
		c.sitemaps.queued(e.URL, 0)
	}
	if len(res.Excluded) > 0 {
		if err := c.fr.Exclude(res.Excluded); err != nil {
			c.log.Warn("cannot record the sitemaps left out", "host", host, "err", err)
		}
	}
	if len(res.Links) > 0 {
		if _, err := c.fr.Add(res.Links); err != nil {
			c.log.Warn("cannot queue sitemaps", "host", host, "err", err)
		}
	}
}

// sitemapLinks reads resp as a sitemap when Config.Sitemaps is set and its body is one (a
// <urlset> or <sitemapindex>, gzip-compressed or not), sorts the URLs it lists into res like
// links (an index's sitemaps at the index's depth, a urlset's pages one deeper), and reports
// whether it was a sitemap. The host's sitemap budgets (budgets.go) bound what is taken: the
// documents read, the urlset entries taken, and the nesting of indexes; what a budget cuts is
// recorded once per sitemap, excluded with ReasonSitemapBudget and the count in its detail. A
// sitemap over the protocol's limits is cut there, and a broken one read up to the break;
// either way the rest is recorded as excluded with reason "limit" or "sitemap", under the
// sitemap's URL, and the crawl goes on.
func (c *Crawler) sitemapLinks(res *frontier.Result, l frontier.Lease, u *url.URL, resp *fetch.Response) bool {
	if !c.cfg.Sitemaps || resp.ContentType == "text/html" || resp.ContentType == "application/xhtml+xml" {
		return false
	}
	kind := sitemap.Sniff(resp.Body)
	if kind == 0 {
		return false // not a sitemap: an ordinary page
	}
	depth := l.Depth + 1
	if kind == sitemap.Index {
		depth = l.Depth
	}
	// Only the entries the budgets allow are read: the rest costs no parsing.
	level, readable := c.sitemaps.read(l.Host, l.URL)
	var limit int
	var why string
	switch {
	case !readable:
		why = fmt.Sprintf("the host's budget of %d sitemap documents was spent", c.sitemaps.lim.Docs)
	case kind == sitemap.Index && level >= c.sitemaps.lim.Nesting:
		why = fmt.Sprintf("an index nested %d deep lists no sitemap that is read (at most %d)", level, c.sitemaps.lim.Nesting)
	case kind == sitemap.Index:
		limit = c.sitemaps.reserveDocs(l.Host, sitemap.MaxURLs)
		why = fmt.Sprintf("the host's budget of %d sitemap documents was spent", c.sitemaps.lim.Docs)
	default:
		limit = c.sitemaps.takeURLs(l.Host, sitemap.MaxURLs)
		why = fmt.Sprintf("the host's budget of %d URLs from sitemaps was spent", c.sitemaps.lim.URLs)
	}
	var entries []sitemap.Entry
	var err error
	if limit > 0 {
		_, entries, err = sitemap.Parse(resp.Body, sitemap.Limits{URLs: limit})
	}
	c.sitemaps.refund(l.Host, kind, limit-len(entries))
	var cut string // what the budgets cut, if they did
	switch {
	case limit == 0:
		cut = "not read: " + why
	case limit < sitemap.MaxURLs && len(entries) == limit && errors.Is(err, sitemap.ErrTooBig):
		cut, err = fmt.Sprintf("the entries after the first %d not read: %s", limit, why), nil
	}
	if err != nil && resp.Truncated {
		err = fmt.Errorf("%w (the body was cut at --max-body)", err)
	}
	for _, e := range entries {
		t, perr := urlnorm.Resolve(u, e.Loc)
		if perr != nil {
			unusable(res, l.URL, e.Loc, perr, depth, 0)
			continue
		}
		t.User = nil
		links := len(res.Links)
		c.consider(res, frontier.Entry{URL: t.String(), Host: urlnorm.HostKey(t), Depth: depth, Parent: l.URL}, t, false)
		if kind == sitemap.Index && len(res.Links) > links {
			c.sitemaps.queued(res.Links[links].URL, level+1)
		}
	}
	if cut != "" {
		c.log.Warn("sitemap cut by its budget", "sitemap", l.URL, "read", len(entries), "cut", cut)
		res.Excluded = append(res.Excluded, frontier.Exclusion{
			Entry:  frontier.Entry{URL: l.URL + " (over the sitemap budget)", Host: l.Host, Depth: depth, Parent: l.URL},
			Reason: ReasonSitemapBudget, Detail: fmt.Sprintf("sitemap %s: %s", l.URL, cut),
		})
	}
	if err != nil {
		reason := ReasonSitemap
		if errors.Is(err, sitemap.ErrTooBig) {
			reason = frontier.ReasonLimit
		}
		c.log.Warn("sitemap cut", "sitemap", l.URL, "entries", len(entries), "err", err)
		res.Excluded = append(res.Excluded, frontier.Exclusion{
			Entry:  frontier.Entry{URL: l.URL + " (rest of the sitemap)", Depth: depth, Parent: l.URL},
			Reason: reason, Detail: fmt.Sprintf("sitemap %s: %v", l.URL, err),
		})
	}
	return true
}

// ReasonSitemap is the exclusion reason of the part of a sitemap that could not be read.
const ReasonSitemap = "sitemap"
