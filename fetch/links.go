package fetch

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"unsafe"

	"github.com/crawl-project/crawl/internal/urlnorm"
)

// Bounds on what ExtractLinks keeps from one page.
const (
	// MaxLinks is the most links ExtractLinks returns for one page.
	MaxLinks = 100_000
	// MaxSkipped is the most unusable references kept in Links.Skipped.
	MaxSkipped = 1000
	// maxSkipRef is the most bytes of an unusable reference kept in a Skip.
	maxSkipRef = 256
)

// Link is one outgoing link of a page.
type Link struct {
	URL *url.URL // normalized with urlnorm
	Str string   // URL.String(), made once by ExtractLinks (empty from ExtractRequisites)
	// NoFollow is set if every occurrence of the link carries
	// rel="nofollow", or the page as a whole is nofollow.
	NoFollow bool
}

// Skip is a reference found in a page that did not give a usable URL.
type Skip struct {
	Ref string // the reference as written, cut to 256 bytes
	Err error  // from urlnorm.Resolve: wraps urlnorm.ErrScheme, ErrTooLong, ...
}

// Links is what ExtractLinks found in one response.
type Links struct {
	// Links are normalized, deduplicated and in document order (of first
	// occurrence). At most MaxLinks.
	Links []Link
	// Dropped counts references met after MaxLinks links had been kept.
	// They are not resolved, so duplicates and unusable ones count too.
	Dropped int
	// NoIndex is set by a noindex or none directive in meta robots (or meta
	// named after the agent) or in an X-Robots-Tag header that applies.
	NoIndex bool
	// NoFollow is the page-level nofollow (from the same sources); when set,
	// every Link has NoFollow set too.
	NoFollow bool
	// Skipped are references that failed to normalize (bad scheme such as
	// javascript: or mailto:, too long, bad host ...), at most MaxSkipped.
	Skipped []Skip
}

// ExtractLinks returns the links of a response and the robots directives
// that govern them. base is the URL the body was fetched from; header is the
// response header (for X-Robots-Tag); contentType is a media type as in
// Response.ContentType; agent is the crawler's product token (as matched in
// robots.txt), used for <meta name="AGENT"> and "AGENT: ..." X-Robots-Tag
// values; it may be "".
//
// Only text/html and application/xhtml+xml bodies are parsed; for other
// types only X-Robots-Tag is read. Links come from a[href], area[href],
// frame[src], iframe[src] and link[href] whose rel has canonical, next,
// prev or search; relative references resolve against the first <base href> (if it is
// a usable http(s) URL) or else base. Bytes are read as UTF-8; invalid
// sequences are kept and percent-encoded by normalization.
//
// ExtractLinks is pure and safe for concurrent use. Its memory beyond the
// returned Links is a small constant: the HTML is tokenized in place, not
// parsed into a tree.
func ExtractLinks(base *url.URL, header http.Header, contentType string, body []byte, agent string) Links {
	return extractLinks(base, header, contentType, body, agent, MaxLinks)
}

// extractLinks is ExtractLinks with the link cap as a parameter, for tests.
func extractLinks(base *url.URL, header http.Header, contentType string, body []byte, agent string, maxLinks int) Links {
	var out Links
	for _, v := range header.Values("X-Robots-Tag") {
		ni, nf := parseXRobotsTag(v, agent)
		out.NoIndex = out.NoIndex || ni
		out.NoFollow = out.NoFollow || nf
	}
	if !isHTML(contentType) {
		return out
	}
	e := extractor{out: &out, resolve: urlnorm.NewResolver(findBase(base, body)), agent: agent, max: maxLinks, seen: make(map[string]int)}
	e.scan(body)
	if out.NoFollow {
		for i := range out.Links {
			out.Links[i].NoFollow = true
		}
	}
	return out
}

func isHTML(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// findBase returns the document base URL: the first <base> element with an
// href, resolved against the URL the page came from, if that gives a usable
// URL; otherwise the page URL. HTML defines it document-wide, so it must be
// known before the first link is resolved.
func findBase(page *url.URL, body []byte) *url.URL {
	if !mayContainBase(body) {
		return page
	}
	for s := (tagScanner{b: body}); s.next(); {
		if s.kind != tagBase {
			continue
		}
		if href, ok := s.attr(attrHref); ok {
			if u, err := urlnorm.Resolve(page, string(href)); err == nil {
				return u
			}
			return page
		}
	}
	return page
}

// mayContainBase is a cheap prefilter: does "<base" occur, in any case?
func mayContainBase(body []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(body[i:], '<')
		if j < 0 {
			return false
		}
		i += j + 1
		if len(body)-i >= 4 && bytes.EqualFold(body[i:i+4], []byte("base")) {
			return true
		}
	}
}

type extractor struct {
	out *Links
	// resolve resolves references against the document's base URL.
	resolve resolver
	agent   string
	max     int            // cap on len(out.Links)
	seen    map[string]int // normalized URL -> index in out.Links
}

func (e *extractor) scan(body []byte) {
	for s := (tagScanner{b: body}); s.next(); {
		switch s.kind {
		case tagA:
			if href, ok := s.attr(attrHref); ok {
				rel, _ := s.attr(attrRel)
				e.add(view(href), hasToken(rel, "nofollow"))
			}
		case tagFrame:
			if src, ok := s.attr(attrSrc); ok {
				e.add(view(src), false)
			}
		case tagLink:
			rel, _ := s.attr(attrRel)
			if href, ok := s.attr(attrHref); ok && (hasToken(rel, "canonical") || hasToken(rel, "next") || hasToken(rel, "prev") || hasToken(rel, "search")) {
				e.add(view(href), hasToken(rel, "nofollow"))
			}
		case tagMeta:
			name, hasName := s.attr(attrName)
			content, hasContent := s.attr(attrContent)
			n := bytes.TrimSpace(name)
			if hasName && hasContent && (bytes.EqualFold(n, []byte("robots")) || e.agent != "" && bytes.EqualFold(n, []byte(e.agent))) {
				ni, nf := parseDirectives(string(content))
				e.out.NoIndex = e.out.NoIndex || ni
				e.out.NoFollow = e.out.NoFollow || nf
			}
		}
	}
}

// view returns b as a string without copying it: b must not change while the string is in
// use, and the string must not be kept (add copies what it keeps of a reference). The body
// ExtractLinks reads does not change while it runs.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// resolver is what extractor needs of a urlnorm.Resolver (its tests put the old
// urlnorm.Resolve behind it).
type resolver interface {
	Normalize(ref string) ([]byte, error)
	URL() (*url.URL, string, error)
}

// add resolves ref and keeps the link it gives (or the reason it gives none); it keeps a copy
// of ref, never ref itself.
func (e *extractor) add(ref string, nofollow bool) {
	if len(e.out.Links) >= e.max {
		e.out.Dropped++
		return
	}
	b, err := e.resolve.Normalize(ref)
	if err == nil {
		if i, ok := e.seen[string(b)]; ok {
			// A link followed anywhere on the page is followed.
			e.out.Links[i].NoFollow = e.out.Links[i].NoFollow && nofollow
			return
		}
	}
	var u *url.URL
	var key string
	if err == nil {
		u, key, err = e.resolve.URL()
	}
	if err != nil {
		if len(e.out.Skipped) < MaxSkipped {
			e.out.Skipped = append(e.out.Skipped, Skip{Ref: strings.Clone(ref[:min(len(ref), maxSkipRef)]), Err: err})
		}
		return
	}
	e.seen[key] = len(e.out.Links)
	e.out.Links = append(e.out.Links, Link{URL: u, Str: key, NoFollow: nofollow})
}

// hasToken reports whether the space-separated list s contains tok, ignoring
// case.
func hasToken(s []byte, tok string) bool {
	for f := range bytes.FieldsSeq(s) {
		if bytes.EqualFold(f, []byte(tok)) {
			return true
		}
	}
	return false
}

// parseDirectives reads a robots directive list ("noindex, nofollow",
// "none") as found in meta robots content.
func parseDirectives(s string) (noindex, nofollow bool) {
	for _, d := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' }) {
		ni, nf := directive(d)
		noindex, nofollow = noindex || ni, nofollow || nf
	}
	return noindex, nofollow
}

func directive(d string) (noindex, nofollow bool) {
	switch strings.ToLower(strings.TrimSpace(d)) {
	case "noindex":
		return true, false
	case "nofollow":
		return false, true
	case "none":
		return true, true
	}
	return false, false
}

// valuedDirectives are X-Robots-Tag directives written "name: value"; their
// name must not be taken for a user agent.
var valuedDirectives = map[string]bool{
	"unavailable_after": true, "max-snippet": true, "max-image-preview": true, "max-video-preview": true,
}

// parseXRobotsTag reads one X-Robots-Tag header value, such as
// "noindex, nofollow" or "googlebot: noindex, otherbot: nofollow". A
// directive applies if no agent name precedes it, or the nearest preceding
// "name:" matches agent (ignoring case).
func parseXRobotsTag(v, agent string) (noindex, nofollow bool) {
	applies := true
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if name, rest, ok := strings.Cut(part, ":"); ok {
			name = strings.TrimSpace(name)
			if valuedDirectives[strings.ToLower(name)] {
				continue
			}
			if !isProductToken(name) {
				continue // e.g. the time in an unavailable_after date
			}
			applies = agent != "" && strings.EqualFold(name, agent)
			part = rest
		}
		if applies {
			ni, nf := parseDirectives(part)
			noindex, nofollow = noindex || ni, nofollow || nf
		}
	}
	return noindex, nofollow
}

func isProductToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
