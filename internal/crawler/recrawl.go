package crawler

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/sitemap"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/storage"
)

// changeRate is a URL's estimated change rate, from its visits so far: a revisit answered 304,
// or 2xx with the same body as before, is no change, any other answer a change. With r revisits and c changes, the estimate (c+1)/(r+2) is above,
// at or below one half. A stored sitemap's <lastmod> for the URL overrides it: later than the
// last visit is "often", earlier "seldom".
type changeRate int

// Change rates, in the order --recrawl revisits them.
const (
	changesOften   changeRate = iota // changed at more than half its revisits
	changesAsOften                   // at half of them, or never revisited yet
	changesSeldom                    // at fewer than half
)

var changeRates = []changeRate{changesOften, changesAsOften, changesSeldom}

func rateOf(revisits, changes int) changeRate {
	switch {
	case 2*changes > revisits:
		return changesOften
	case 2*changes == revisits:
		return changesAsOften
	}
	return changesSeldom
}

// recrawlPlan decides which fetched URLs a --recrawl run revisits, and in which order: all of
// them, or with --older-than only those whose last visit (its page's FetchedAt) is before the
// cutoff; those whose pages change most often first.
type recrawlPlan struct {
	on   bool
	rate map[uint64]changeRate // by the Seq of each URL's latest page; pages too recent are left out
	pass changeRate            // the rate settle revisits now
	ages RecrawlAges           // how many URLs are due, how many too recent
}

// RecrawlAges is how the fetched URLs a --recrawl found in the store divide by their last
// visit (a URL's latest stored page): Old were last visited at least --older-than D ago (all of
// them without --older-than) and are revisited if the settings admit them; Recent less than D
// ago, left for a later run, the first of them D old at NextAt (zero when Recent is 0).
type RecrawlAges struct {
	Old, Recent int
	NextAt      time.Time
}

// RecrawlAges returns how this run's --recrawl divided the fetched URLs: the zero value
// without --recrawl.
func (c *Crawler) RecrawlAges() RecrawlAges { return c.recrawl.ages }

// planRecrawl reads the stored pages' metadata once: each URL's visits and changes, and which
// latest pages are too recent to be revisited at now.
func planRecrawl(cfg *Config, db *storage.DB, now time.Time) (recrawlPlan, error) {
	if !cfg.Recrawl {
		return recrawlPlan{}, nil
	}
	type history struct { // of one URL; small, as there is one per URL of the store
		latestSeq uint64
		latestAt  time.Time
		revisits  int
		changes   int
	}
	// Keyed by a 64-bit hash of the URL, not the URL: two URLs sharing one (probability about
	// n²/2^65 for n URLs) share a history, which only orders their revisits.
	seed := maphash.MakeSeed()
	urls := map[uint64]*history{}
	var sitemaps []uint64 // stored answers that may be sitemaps
	err := db.PagesMeta(func(pg *storage.Page) error {
		if mayBeSitemap(pg) {
			sitemaps = append(sitemaps, pg.Seq)
		}
		k := maphash.String(seed, pg.URL)
		h := urls[k]
		if h == nil {
			urls[k] = &history{latestSeq: pg.Seq, latestAt: pg.FetchedAt}
			return nil
		}
		h.latestSeq, h.latestAt = pg.Seq, pg.FetchedAt
		h.revisits++
		if pg.RevisitOf == 0 && pg.SameAs == 0 {
			h.changes++
		}
		return nil
	})
	if err != nil {
		return recrawlPlan{}, fmt.Errorf("recrawl: %w", err)
	}
	lastMod, err := sitemapLastMods(db, sitemaps, seed)
	if err != nil {
		return recrawlPlan{}, fmt.Errorf("recrawl: %w", err)
	}
	p := recrawlPlan{on: true, rate: make(map[uint64]changeRate, len(urls))}
	cutoff := now.Add(-cfg.RecrawlOlderThan)
	for k, h := range urls {
		if cfg.RecrawlOlderThan > 0 && !h.latestAt.Before(cutoff) {
			at := h.latestAt.Add(cfg.RecrawlOlderThan)
			if p.ages.Recent++; p.ages.NextAt.IsZero() || at.Before(p.ages.NextAt) {
				p.ages.NextAt = at
			}
			continue
		}
		p.ages.Old++
		rate := rateOf(h.revisits, h.changes)
		if t, ok := lastMod[k]; ok {
			rate = changesSeldom // a sitemap says when the page last changed: trust it
			if t.After(h.latestAt) {
				rate = changesOften
			}
		}
		p.rate[h.latestSeq] = rate
	}
	return p, nil
}

// mayBeSitemap reports whether the stored answer p may hold a sitemap: a 2xx that is not HTML.
func mayBeSitemap(p *storage.Page) bool {
	return p.Status >= 200 && p.Status < 300 && p.ContentType != "text/html" && p.ContentType != "application/xhtml+xml" &&
		!strings.HasPrefix(p.ContentType, "image/") && !strings.HasPrefix(p.ContentType, "font/") && p.ContentType != "text/css"
}

// sitemapLastMods reads the stored answers seqs that are sitemaps (urlsets) and returns the
// <lastmod> each lists for its URLs (normalized as links are), the latest when several do, by
// the URL's hash with seed.
func sitemapLastMods(db *storage.DB, seqs []uint64, seed maphash.Seed) (map[uint64]time.Time, error) {
	out := map[uint64]time.Time{}
	for _, seq := range seqs {
		p, err := db.Page(seq)
		if err != nil {
			return nil, err
		}
		kind, entries, _ := sitemap.Parse(p.Body, sitemap.Limits{}) // what a broken file lists before its break counts
		base, err := url.Parse(p.URL)
		if kind != sitemap.URLSet || err != nil {
			continue
		}
		for _, e := range entries {
			if e.LastMod.IsZero() {
				continue
			}
			u, err := urlnorm.Resolve(base, e.Loc)
			if err != nil {
				continue
			}
			u.User = nil
			if k := maphash.String(seed, u.String()); e.LastMod.After(out[k]) {
				out[k] = e.LastMod
			}
		}
	}
	return out, nil
}

// due reports whether the fetched URL r is to be revisited in this pass.
func (p recrawlPlan) due(r frontier.URLRecord) bool {
	if !p.on || r.State != "fetched" {
		return false
	}
	rate, ok := p.rate[r.PageSeq]
	return ok && rate == p.pass
}

// lastVersion is what a revisit needs of a URL's last stored 2xx answer.
type lastVersion struct {
	v    fetch.Validators // its ETag and Last-Modified, to ask whether it changed
	seq  uint64           // its Seq; 0: the URL has no usable 2xx answer stored
	root uint64           // the Seq of the first of the identical answers it ends (storage.Page.SameAs), else seq
}

// lastVersionOf returns the last 2xx version of a URL whose last visit stored page prev (a
// 304's RevisitOf leads to it). A last visit that stored no 2xx page, or a truncated one,
// gives the zero lastVersion: the revisit is a plain GET compared with nothing.
func (c *Crawler) lastVersionOf(prev uint64) lastVersion {
	p, err := c.db.PageMeta(prev)
	if err == nil && p.RevisitOf != 0 {
		p, err = c.db.PageMeta(p.RevisitOf)
	}
	if err != nil {
		c.log.Warn("revisit without conditions: its last page cannot be read", "seq", prev, "err", err)
		return lastVersion{}
	}
	if p.Status < 200 || p.Status > 299 || p.Truncated {
		return lastVersion{}
	}
	h := http.Header(p.Header)
	lv := lastVersion{v: fetch.Validators{ETag: h.Get("ETag"), LastModified: h.Get("Last-Modified")}, seq: p.Seq, root: p.Seq}
	if p.SameAs != 0 {
		lv.root = p.SameAs
	}
	return lv
}

// markRevisit records on the page of a revisit what it is to the last version lv: a 304 to a
// conditional GET confirms it (RevisitOf, the first of its identical answers, which holds the
// body); a whole 2xx body equal to lv's is the same again (SameAs, naming that first answer
// too). Either way the store keeps no body for p (storage.PutPage).
func (c *Crawler) markRevisit(p *storage.Page, lv lastVersion) {
	switch {
	case lv.seq == 0:
	case p.Status == http.StatusNotModified && lv.v != (fetch.Validators{}):
		p.RevisitOf = lv.root
	case p.Status >= 200 && p.Status < 300 && !p.Truncated:
		last, err := c.db.Page(lv.root)
		if err == nil && bytes.Equal(last.Body, p.Body) {
			p.SameAs = lv.root
		}
	}
}

// revise runs the frontier's Revise with revisit; with --recrawl, once per change rate, most
// changing first, so that each host's queue holds the pages that change most at its front.
func (c *Crawler) revise() (frontier.Revised, error) {
	fr, err := c.revisable("a change of settings that concerns URLs already seen")
	if err != nil {
		return frontier.Revised{}, err
	}
	if !c.recrawl.on {
		return fr.Revise(c.revisit)
	}
	var out frontier.Revised
	for _, rate := range changeRates {
		c.recrawl.pass = rate
		rev, err := fr.Revise(c.revisit)
		if err != nil {
			return out, err
		}
		if out.RequeuedFailed == nil {
			out = rev
		} else {
			out.Add(rev)
		}
	}
	return out, nil
}
