package crawler

import (
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/termsafe"
)

// URLLogEntry is one line of --log-urls: a URL that reached its final state in this run. The
// JSON field names are a stable interface (README "--log-urls").
type URLLogEntry struct {
	Time     time.Time `json:"time"`
	URL      string    `json:"url"`
	State    string    `json:"state"`            // fetched, failed or excluded
	Reason   string    `json:"reason,omitempty"` // failed, excluded: why
	Detail   string    `json:"detail,omitempty"`
	Status   int       `json:"status,omitempty"` // the HTTP status, if there was a response
	Attempts int       `json:"attempts"`         // attempts made, this one included
	Depth    int       `json:"depth"`
	Parent   string    `json:"parent,omitempty"` // the page that linked here
}

// urlLog writes a URLLogEntry for every URL a Complete of this run records as fetched, failed
// or excluded. Its lines are written whole, one at a time.
type urlLog struct {
	mu  sync.Mutex
	enc *json.Encoder
	log *slog.Logger
	err error // the first write error (logged); later lines are not written
}

func newURLLog(w io.Writer, log *slog.Logger) *urlLog {
	return &urlLog{enc: json.NewEncoder(w), log: log}
}

// complete records r through the frontier, then logs it (--log-urls) if it is a final state.
func (c *Crawler) complete(l frontier.Lease, r frontier.Result) error {
	r, err := c.addAhead(r)
	if err != nil {
		return err
	}
	if err := c.fr.Complete(l, r); err != nil || r.Kind == frontier.Retry || c.urlLog == nil {
		return err
	}
	c.urlLog.write(l, r)
	return nil
}

func (u *urlLog) write(l frontier.Lease, r frontier.Result) {
	e := URLLogEntry{Time: time.Now().UTC(), URL: l.URL, State: r.Kind.String(), Reason: r.Reason, Detail: termsafe.Escape(r.Detail),
		Status: r.Status, Attempts: l.Attempts, Depth: l.Depth, Parent: l.Parent}
	if r.Kind != frontier.Excluded {
		e.Attempts++
	}
	if r.Page != nil {
		e.Status = r.Page.Status
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err == nil {
		if u.err = u.enc.Encode(e); u.err != nil {
			u.log.Warn("cannot write the URL log; no more lines are written to it", "err", u.err)
		}
	}
}
