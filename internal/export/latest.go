package export

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/crawl-project/crawl/storage"
)

// Newest reads a store's pages as each URL's newest visit only (storage.Page.URL, the URL
// requested), for an export with one line or row per URL (JSON Lines with --latest, CSV):
//
//   - every earlier visit of a URL is left out and counted in Older (a URL fetched as a page
//     and as the sub-resource of a rendered page, storage.Page.Subresource, has a newest
//     visit of each);
//   - a newest visit that is a 304 confirming a stored page (storage.Page.RevisitOf) stands
//     for that version: the page passed on is the confirmed one (its Seq, status, headers and
//     body, so a writer's body reader finds its body) with the 304's FetchedAt and Duration,
//     the date it was last confirmed, and with RevisitOf set to its own Seq, which marks it
//     (IsFolded reports it; a stored page carries a RevisitOf only if it is a 304). Such 304s
//     are counted in Folded.
//
// Pages are passed on in the order of the source (fetch order) of each URL's newest visit.
// Pages reads the metadata (meta) once before the pages (src): memory holds one entry of 24
// bytes (plus the map's overhead) per URL, never a body. A Newest is used by one goroutine.
type Newest struct {
	ctx       context.Context
	meta, src Source
	get       func(seq uint64) (*storage.Page, error)
	older     int64
	folded    int64
}

// NewNewest returns src read as each URL's newest visit. meta is src without the bodies (or
// src itself), in the same order; get reads a page by Seq as src gives it (body or not), for
// the version a 304 confirms. Pages stops with ctx's error once ctx is done (checked before
// each page of the metadata's pass; Run checks it before each page passed on).
func NewNewest(ctx context.Context, meta, src Source, get func(seq uint64) (*storage.Page, error)) *Newest {
	return &Newest{ctx: ctx, meta: meta, src: src, get: get}
}

// Older counts the visits the last Pages call left out because their URL was visited later.
func (n *Newest) Older() int64 { return n.older }

// Folded counts the 304s the last Pages call passed on as the version they confirm.
func (n *Newest) Folded() int64 { return n.folded }

// IsFolded reports whether p, a page Newest passed on, stands for a 304 that confirmed it.
func IsFolded(p *storage.Page) bool {
	return p.RevisitOf != 0 && p.RevisitOf == p.Seq && p.Status != http.StatusNotModified
}

// Pages is a Source: it calls fn for each URL's newest visit, as Newest describes.
func (n *Newest) Pages(fn func(p *storage.Page) error) error {
	n.older, n.folded = 0, 0
	newest := map[urlKey]uint64{}
	err := n.meta(func(p *storage.Page) error {
		if err := n.ctx.Err(); err != nil {
			return err
		}
		newest[fetchKey(p)] = p.Seq // fetch order: the last one seen is the newest
		return nil
	})
	if err != nil {
		return err
	}
	return n.src(func(p *storage.Page) error {
		if newest[fetchKey(p)] != p.Seq {
			n.older++
			return nil
		}
		if p.Status != http.StatusNotModified || p.RevisitOf == 0 {
			return fn(p)
		}
		v, err := n.get(p.RevisitOf)
		if errors.Is(err, storage.ErrNotFound) {
			err = fmt.Errorf("%w (the page a 304 confirms is missing): %w", storage.ErrDamaged, err)
		}
		if err != nil {
			return fmt.Errorf("export: %s: %w", p.URL, err)
		}
		v.FetchedAt, v.Duration, v.RevisitOf = p.FetchedAt, p.Duration, v.Seq
		n.folded++
		return fn(v)
	})
}
