package crawler

import (
	"net/url"
	"strings"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/urlnorm"
)

// requisites sorts what the page or stylesheet of lease l needs to be shown into res, when
// --requisites is set: each is a URL of role RoleRequisite at l's depth (a requisite is no link
// hop), through the requisite scope, filters and robots.txt like a link, and fetched through
// its host's gate like any URL. Unusable references are recorded as links' are. Of a
// requisite, only a stylesheet's are taken: an HTML page fetched as a requisite (an <object>,
// a mistyped <img>) would otherwise lead on, page by page, at the same depth.
func (c *Crawler) requisites(res *frontier.Result, l frontier.Lease, u *url.URL, resp *fetch.Response) {
	if !c.cfg.Requisites {
		return
	}
	found := fetch.ExtractRequisites(u, resp.ContentType, resp.Body)
	for _, lk := range found.Links {
		lk.URL.User = nil
		e := frontier.Entry{URL: lk.URL.String(), Host: urlnorm.HostKey(lk.URL), Depth: l.Depth, Parent: l.URL,
			Role: frontier.RoleRequisite}
		c.consider(res, e, lk.URL, false)
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
