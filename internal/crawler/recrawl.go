package crawler

import (
	"fmt"
	"net/http"
	"time"

	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/storage"
)

// recrawlPlan decides which fetched URLs a --recrawl run revisits: all of them, or with
// --older-than only those whose last visit (its page's FetchedAt) is before cutoff.
type recrawlPlan struct {
	on     bool
	recent map[uint64]bool // seqs of the pages fetched at or after the cutoff; nil: no cutoff
}

// planRecrawl reads, when --older-than asks for it, which stored pages are too recent to be
// revisited at now.
func planRecrawl(cfg *Config, db *storage.DB, now time.Time) (recrawlPlan, error) {
	if !cfg.Recrawl {
		return recrawlPlan{}, nil
	}
	p := recrawlPlan{on: true}
	if cfg.RecrawlOlderThan <= 0 {
		return p, nil
	}
	cutoff := now.Add(-cfg.RecrawlOlderThan)
	p.recent = map[uint64]bool{}
	err := db.PagesMeta(func(pg *storage.Page) error {
		if !pg.FetchedAt.Before(cutoff) {
			p.recent[pg.Seq] = true
		}
		return nil
	})
	if err != nil {
		return recrawlPlan{}, fmt.Errorf("recrawl: %w", err)
	}
	return p, nil
}

// due reports whether the fetched URL r is to be revisited.
func (p recrawlPlan) due(r frontier.URLRecord) bool {
	return p.on && r.State == "fetched" && !p.recent[r.PageSeq]
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
