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
// of its robots.txt and /sitemap.xml. They pass scope, filters and robots.txt like links and
// are then fetched like pages, through the host's gate; sitemapLinks reads them. A sitemap the
// settings refuse (out of scope, filtered, robots.txt) or that is not a usable URL is recorded
// as excluded, with its reason, like a link; a sitemap already seen is not queued again.
func (c *Crawler) discoverSitemaps(host, scheme string, rules *robots.Robots) {
	if !c.cfg.Sitemaps || rules == nil || rules.Unreachable() {
		return
	}
	base := &url.URL{Scheme: scheme, Host: host, Path: "/"}
	parent := base.String() + "robots.txt"
	refs := append(rules.Sitemaps(), "/sitemap.xml")
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
// <urlset> or <sitemapindex>, gzip-compressed or not), sorts every URL it lists into res like
// a link (an index's sitemaps at the index's depth, a urlset's pages one deeper), and reports
// whether it was a sitemap. A sitemap over the protocol's limits is cut there, and a broken one
// read up to the break; either way the rest is recorded as excluded with reason "limit" or
// "sitemap", under the sitemap's URL, and the crawl goes on.
func (c *Crawler) sitemapLinks(res *frontier.Result, l frontier.Lease, u *url.URL, resp *fetch.Response) bool {
	if !c.cfg.Sitemaps || resp.ContentType == "text/html" || resp.ContentType == "application/xhtml+xml" {
		return false
	}
	kind, entries, err := sitemap.Parse(resp.Body, sitemap.Limits{})
	if kind == 0 {
		return false // not a sitemap: an ordinary page
	}
	if err != nil && resp.Truncated {
		err = fmt.Errorf("%w (the body was cut at --max-body)", err)
	}
	depth := l.Depth + 1
	if kind == sitemap.Index {
		depth = l.Depth
	}
	for _, e := range entries {
		t, perr := urlnorm.Resolve(u, e.Loc)
		if perr != nil {
			unusable(res, l.URL, e.Loc, perr, depth, 0)
			continue
		}
		t.User = nil
		c.consider(res, frontier.Entry{URL: t.String(), Host: urlnorm.HostKey(t), Depth: depth, Parent: l.URL}, t, false)
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
