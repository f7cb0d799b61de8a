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

// urlLogger is a Frontier that writes a URLLogEntry to w for every URL Complete records as
// fetched, failed or excluded. Its lines are written whole, one at a time.
type urlLogger struct {
	Frontier
	mu  sync.Mutex
	enc *json.Encoder
	log *slog.Logger
	err error // the first write error (logged); later lines are not written
}

func logURLs(fr Frontier, w io.Writer, log *slog.Logger) *urlLogger {
	return &urlLogger{Frontier: fr, enc: json.NewEncoder(w), log: log}
}

// Complete records r, then logs it if it is a final state.
func (u *urlLogger) Complete(l frontier.Lease, r frontier.Result) error {
	if err := u.Frontier.Complete(l, r); err != nil || r.Kind == frontier.Retry {
		return err
	}
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
	return nil
}
