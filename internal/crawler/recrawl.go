package crawler

import (
	"fmt"
	"net/http"
	"time"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/storage"
)

// changeRate is a URL's estimated change rate, from its visits so far: a revisit answered 304
// is no change, any other answer to a revisit a change (a page without validators counts as
// changed at each visit). With r revisits and c changes, the estimate (c+1)/(r+2) is above,
// at or below one half.
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
}

// planRecrawl reads the stored pages' metadata once: each URL's visits and changes, and which
// latest pages are too recent to be revisited at now.
func planRecrawl(cfg *Config, db *storage.DB, now time.Time) (recrawlPlan, error) {
	if !cfg.Recrawl {
		return recrawlPlan{}, nil
	}
	type history struct {
		latest   *storage.Page
		revisits int
		changes  int
	}
	urls := map[string]*history{}
	err := db.PagesMeta(func(pg *storage.Page) error {
		h := urls[pg.URL]
		if h == nil {
			urls[pg.URL] = &history{latest: pg}
			return nil
		}
		h.latest = pg
		h.revisits++
		if pg.Status != http.StatusNotModified {
			h.changes++
		}
		return nil
	})
	if err != nil {
		return recrawlPlan{}, fmt.Errorf("recrawl: %w", err)
	}
	p := recrawlPlan{on: true, rate: make(map[uint64]changeRate, len(urls))}
	cutoff := now.Add(-cfg.RecrawlOlderThan)
	for _, h := range urls {
		if cfg.RecrawlOlderThan > 0 && !h.latest.FetchedAt.Before(cutoff) {
			continue
		}
		p.rate[h.latest.Seq] = rateOf(h.revisits, h.changes)
	}
	return p, nil
}

// due reports whether the fetched URL r is to be revisited in this pass.
func (p recrawlPlan) due(r frontier.URLRecord) bool {
	if !p.on || r.State != "fetched" {
		return false
	}
	rate, ok := p.rate[r.PageSeq]
	return ok && rate == p.pass
}

// validators returns the validators to revisit a URL whose last visit stored page prev with,
// and the Seq of the 2xx page they belong to (a 304 answer confirms that page: its RevisitOf).
// A last visit that stored no 2xx page, or a page without ETag and Last-Modified, gives none
// and base 0: the revisit is a plain GET.
func (c *Crawler) validators(prev uint64) (v fetch.Validators, base uint64) {
	p, err := c.db.PageMeta(prev)
	if err == nil && p.RevisitOf != 0 {
		p, err = c.db.PageMeta(p.RevisitOf)
	}
	if err != nil {
		c.log.Warn("revisit without conditions: its last page cannot be read", "seq", prev, "err", err)
		return fetch.Validators{}, 0
	}
	if p.Status < 200 || p.Status > 299 || p.Truncated {
		return fetch.Validators{}, 0
	}
	h := http.Header(p.Header)
	v = fetch.Validators{ETag: h.Get("ETag"), LastModified: h.Get("Last-Modified")}
	if v == (fetch.Validators{}) {
		return v, 0
	}
	return v, p.Seq
}

// revise runs the frontier's Revise with revisit; with --recrawl, once per change rate, most
// changing first, so that each host's queue holds the pages that change most at its front.
func (c *Crawler) revise(fr *frontier.Frontier) (frontier.Revised, error) {
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
