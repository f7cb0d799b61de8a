package crawler

import (
	"sync/atomic"

	"github.com/crawl-project/crawl/storage"
)

// RenderCounts are a crawl's rendering figures (Status.Render), all runs together.
type RenderCounts struct {
	Mode     string `json:"mode"`     // --render
	Rendered int    `json:"rendered"` // pages stored with their rendered DOM
	Of       int    `json:"of"`       // HTML pages stored (2xx, fetched as pages; sub-resources apart)
	Cut      int    `json:"cut"`      // of Rendered: cut by a cap (time, sub-requests, bytes) and kept as rendered
	Failed   int    `json:"failed"`   // of this run's pages: failed render-crash or render-timeout
}

// renderCounters count what RenderCounts reports; safe for concurrent use.
type renderCounters struct {
	rendered, of, cut, failed atomic.Int64
}

// countStored counts p, a page as stored.
func (n *renderCounters) countStored(p *storage.Page) {
	if p.Subresource || p.Status < 200 || p.Status >= 300 || !isHTML(p.ContentType) {
		return
	}
	n.of.Add(1)
	if p.Render != nil {
		n.rendered.Add(1)
		if p.Render.Cut != storage.RenderComplete {
			n.cut.Add(1)
		}
	}
}

func (n *renderCounters) counts(mode RenderMode) *RenderCounts {
	return &RenderCounts{Mode: mode.String(), Rendered: int(n.rendered.Load()), Of: int(n.of.Load()),
		Cut: int(n.cut.Load()), Failed: int(n.failed.Load())}
}

// countRendered counts p, a page just stored, when the crawl renders pages.
func (c *Crawler) countRendered(p *storage.Page) {
	if c.cfg.Render.Mode != RenderNever {
		c.renders.counts.countStored(p)
	}
}

// isHTML reports whether a media type is one a browser renders as a document.
func isHTML(mediaType string) bool {
	return mediaType == "text/html" || mediaType == "application/xhtml+xml"
}

// storedRenderCounts counts the rendered pages of the store db, for the status of a stopped
// crawl whose settings render pages (it reads every page's metadata).
func storedRenderCounts(db *storage.DB, mode RenderMode) (*RenderCounts, error) {
	var n renderCounters
	err := db.PagesMeta(func(p *storage.Page) error {
		n.countStored(p)
		return nil
	})
	return n.counts(mode), err
}
