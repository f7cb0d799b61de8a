package simweb

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Validators is what a page of a host with HostSpec.Revisions tells a client to revalidate it
// with; page i gets ValidatorsOf(i).
type Validators int

// The validator styles pages take in turn.
const (
	ETagAndLastModified Validators = iota // both; If-None-Match wins when a request sends both
	ETagOnly
	LastModifiedOnly
	NoValidators // answered 200 with its body every time
)

// ValidatorsOf returns the validators of ordinary page i (page 0 is "/").
func ValidatorsOf(i int) Validators { return Validators(i % 4) }

// revisionEpoch is the Last-Modified of every page's first revision; revision n is n hours
// later, so Last-Modified never depends on the clock and stays in the past.
var revisionEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// revision returns the current revision of the page at path p (0 until Change) and whether p is
// an ordinary page of a host with Revisions.
func (h *host) revision(p string) (int, bool) {
	if !h.spec.Revisions {
		return 0, false
	}
	if _, ok := h.site.byPath[p]; !ok {
		return 0, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.revisions[p], true
}

// Change gives the pages at paths of host name a new revision: a different body, ETag and
// Last-Modified. It returns an error for an unknown host, a host without Revisions or a path
// that is not one of its ordinary pages. Revisions survive Reset.
func (w *Web) Change(name string, paths ...string) error {
	h := w.byName[name]
	if h == nil {
		return fmt.Errorf("%w: no host %q", ErrBadSpec, name)
	}
	if !h.spec.Revisions {
		return fmt.Errorf("%w: host %q has no Revisions", ErrBadSpec, name)
	}
	for _, p := range paths {
		if _, ok := h.site.byPath[p]; !ok {
			return fmt.Errorf("%w: %q is not a page of host %q", ErrBadSpec, p, name)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.revisions == nil {
		h.revisions = make(map[string]int)
	}
	for _, p := range paths {
		h.revisions[p]++
	}
	return nil
}

// revised returns body as revision rev shows it: unchanged for revision 0, else with a
// paragraph naming the revision before </body>.
func revised(body []byte, rev int) []byte {
	if rev == 0 {
		return body
	}
	mark := fmt.Sprintf("<p>revision %d</p>\n", rev)
	s := string(body)
	if i := strings.LastIndex(s, "</body>"); i >= 0 {
		return []byte(s[:i] + mark + s[i:])
	}
	return []byte(s + mark)
}

// notModified sets the validators of page i at revision rev on w and reports whether r's
// conditions match them, so that the answer is 304 Not Modified (RFC 9110 section 13.2.2:
// If-None-Match, when present, decides alone; If-Modified-Since otherwise).
func notModified(w http.ResponseWriter, r *http.Request, i, rev int) bool {
	v := ValidatorsOf(i)
	etag := `"p` + strconv.Itoa(i) + `-r` + strconv.Itoa(rev) + `"`
	modified := revisionEpoch.Add(time.Duration(rev) * time.Hour)
	if v == ETagAndLastModified || v == ETagOnly {
		w.Header().Set("ETag", etag)
	}
	if v == ETagAndLastModified || v == LastModifiedOnly {
		w.Header().Set("Last-Modified", modified.Format(http.TimeFormat))
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		if v == LastModifiedOnly || v == NoValidators {
			return false
		}
		for _, t := range strings.Split(inm, ",") {
			if t = strings.TrimPrefix(strings.TrimSpace(t), "W/"); t == etag || t == "*" {
				return true
			}
		}
		return false
	}
	if ims := r.Header.Get("If-Modified-Since"); ims != "" && (v == ETagAndLastModified || v == LastModifiedOnly) {
		t, err := http.ParseTime(ims)
		return err == nil && !modified.After(t)
	}
	return false
}

// countConditional counts r in HostStats.Conditional if it carries a condition.
func (h *host) countConditional(r *http.Request) {
	if r.Header.Get("If-None-Match") == "" && r.Header.Get("If-Modified-Since") == "" {
		return
	}
	h.mu.Lock()
	h.st.stats.Conditional++
	h.mu.Unlock()
}
