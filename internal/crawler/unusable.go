package crawler

import (
	"errors"
	"strings"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/urlnorm"
)

// maxUnusableRef bounds how much of an unusable reference is kept as its record's key.
const maxUnusableRef = 256

// unusable records a reference that names something the crawl will never fetch — another
// scheme (mailto:, javascript:, ftp:) or a URL longer than urlnorm.MaxLength — as excluded
// ("scheme" or "too-long"), so that every link and redirect target the crawl met is accounted
// for. The reference as written, cut to maxUnusableRef bytes, stands for the URL; having no
// usable host it is counted under the host "". References that are not URLs at all (bad
// syntax) are not recorded.
func unusable(res *frontier.Result, parent, ref string, err error, depth, hops int) {
	var reason string
	switch {
	case errors.Is(err, urlnorm.ErrScheme):
		reason = frontier.ReasonScheme
	case errors.Is(err, urlnorm.ErrTooLong):
		reason = frontier.ReasonTooLong
	default:
		return
	}
	ref = strings.ToValidUTF8(strings.TrimSpace(ref), "\uFFFD")
	if strings.IndexByte(ref, 0) >= 0 {
		ref = strings.ReplaceAll(ref, "\x00", "%00")
	}
	if len(ref) > maxUnusableRef {
		ref = strings.ToValidUTF8(ref[:maxUnusableRef], "") + "…"
	}
	if ref == "" {
		return
	}
	res.Excluded = append(res.Excluded, frontier.Exclusion{
		Entry:  frontier.Entry{URL: ref, Depth: depth, Hops: hops, Parent: parent},
		Reason: reason, Detail: err.Error(),
	})
}
