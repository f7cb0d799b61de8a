package fetch

import (
	"bytes"
	"net/url"
	"strings"

	"golang.org/x/net/html"

	"github.com/crawl-project/crawl/internal/urlnorm"
)

// MaxBlocking is the most references ExtractBlocking returns for one document.
const MaxBlocking = 16

// Blocking is one reference ExtractBlocking found: its URL (normalized with urlnorm) and what
// the document loads it as.
type Blocking struct {
	URL  *url.URL
	Kind BlockingKind
}

// BlockingKind is what a document loads a Blocking reference as.
type BlockingKind int

const (
	BlockingStylesheet BlockingKind = iota // link rel=stylesheet
	BlockingScript                         // a classic script's src
)

// ExtractBlocking returns the stylesheets and scripts of an HTML document that a browser
// rendering it fetches before its scripts have run, as a browser's preload scanner finds them,
// in document order, each once, at most MaxBlocking: link[href] whose rel has stylesheet (not
// alternate, not disabled) and script[src] of a classic script (classicScript; not nomodule,
// which a browser with modules skips); not inside <template>; and only those a browser fetches
// without CORS (no crossorigin attribute: module scripts are left out too), so that the
// request a crawl sends for one is the request the browser would. References resolve against <base href> as for
// ExtractLinks. ExtractBlocking is pure and safe for concurrent use.
func ExtractBlocking(base *url.URL, body []byte) []Blocking {
	var out Links
	e := extractor{out: &out, resolve: urlnorm.NewResolver(findBase(base, body)), max: MaxBlocking, seen: make(map[string]int)}
	z := html.NewTokenizer(bytes.NewReader(body))
	template := 0 // depth of <template> elements: their content is inert
	var kinds []BlockingKind
	for len(out.Links) < MaxBlocking {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken && tt != html.EndTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		tag := string(name)
		if tag == "template" {
			switch {
			case tt == html.StartTagToken:
				template++
			case tt == html.EndTagToken && template > 0:
				template--
			}
			continue
		}
		if tt == html.EndTagToken || template > 0 || (tag != "link" && tag != "script") {
			continue
		}
		attrs := tagAttrs(z, hasAttr)
		if ref, kind, ok := blockingRef(tag, attrs); ok {
			if e.add(ref, false); len(out.Links) > len(kinds) { // a new URL, not one seen or unusable
				kinds = append(kinds, kind)
			}
		}
	}
	refs := make([]Blocking, len(out.Links))
	for i, l := range out.Links {
		refs[i] = Blocking{URL: l.URL, Kind: kinds[i]}
	}
	return refs
}

// blockingRef returns the reference of a link or script start tag that ExtractBlocking keeps.
func blockingRef(tag string, attrs map[string]string) (string, BlockingKind, bool) {
	if _, cors := attrs["crossorigin"]; cors {
		return "", 0, false
	}
	var ref string
	var kind BlockingKind
	switch tag {
	case "link":
		rel := []byte(attrs["rel"])
		_, disabled := attrs["disabled"]
		if !hasToken(rel, "stylesheet") || hasToken(rel, "alternate") || disabled {
			return "", 0, false
		}
		ref, kind = attrs["href"], BlockingStylesheet
	case "script":
		_, nomodule := attrs["nomodule"]
		if nomodule || !classicScript(attrs["type"]) {
			return "", 0, false
		}
		ref, kind = attrs["src"], BlockingScript
	}
	ref = strings.TrimSpace(ref)
	return ref, kind, ref != ""
}

// classicScript reports whether a script element of type typ is a classic script: its type
// absent or empty, or a JavaScript MIME type essence match (the whole value, ignoring case and
// surrounding spaces, as the HTML standard says). "module" is fetched with CORS; data blocks
// such as application/ld+json are not fetched at all.
func classicScript(typ string) bool {
	t := strings.ToLower(strings.TrimSpace(typ))
	if t == "" {
		return true
	}
	switch t {
	case "text/javascript", "application/javascript", "application/ecmascript", "application/x-ecmascript",
		"application/x-javascript", "text/ecmascript", "text/javascript1.0", "text/javascript1.1",
		"text/javascript1.2", "text/javascript1.3", "text/javascript1.4", "text/javascript1.5",
		"text/jscript", "text/livescript", "text/x-ecmascript", "text/x-javascript":
		return true
	}
	return false
}
