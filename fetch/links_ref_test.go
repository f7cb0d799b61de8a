package fetch

// refExtractLinks is ExtractLinks as it was written on golang.org/x/net/html's Tokenizer and
// urlnorm.Resolve, kept as the oracle the tag scanner and urlnorm.Resolver are checked against:
// both must find the same links, skips and directives in any input.

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/html"

	"github.com/crawl-project/crawl/internal/urlnorm"
)

func refExtractLinks(base *url.URL, header http.Header, contentType string, body []byte, agent string, maxLinks int) Links {
	var out Links
	for _, v := range header.Values("X-Robots-Tag") {
		ni, nf := parseXRobotsTag(v, agent)
		out.NoIndex = out.NoIndex || ni
		out.NoFollow = out.NoFollow || nf
	}
	if !isHTML(contentType) {
		return out
	}
	e := extractor{out: &out, resolve: refResolve(refFindBase(base, body)), agent: agent, max: maxLinks, seen: make(map[string]int)}
	refScan(&e, body)
	if out.NoFollow {
		for i := range out.Links {
			out.Links[i].NoFollow = true
		}
	}
	return out
}

// refResolver resolves references against base as ExtractLinks did before urlnorm.Resolver:
// with urlnorm.Resolve, and String() of its URL.
type refResolver struct {
	base *url.URL
	u    *url.URL
}

func refResolve(base *url.URL) *refResolver { return &refResolver{base: base} }

func (r *refResolver) Normalize(ref string) ([]byte, error) {
	u, err := urlnorm.Resolve(r.base, ref)
	if err != nil {
		return nil, err
	}
	r.u = u
	return []byte(u.String()), nil
}

func (r *refResolver) URL() (*url.URL, string, error) { return r.u, r.u.String(), nil }

func refFindBase(page *url.URL, body []byte) *url.URL {
	if !mayContainBase(body) {
		return page
	}
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return page
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			if string(name) != "base" || !hasAttr {
				continue
			}
			for more := true; more; {
				var k, v []byte
				k, v, more = z.TagAttr()
				if string(k) == "href" {
					if u, err := urlnorm.Resolve(page, string(v)); err == nil {
						return u
					}
					return page
				}
			}
		}
	}
}

type refAttrs struct {
	href, src, rel, name, content    string
	hasHref, hasSrc, hasRel, hasName bool
	hasContent                       bool
}

func refScan(e *extractor, body []byte) {
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		if !hasAttr {
			continue
		}
		tag := string(name)
		switch tag {
		case "a", "area", "frame", "iframe", "link", "meta":
		default:
			continue
		}
		a := refReadAttrs(z)
		switch tag {
		case "a", "area":
			if a.hasHref {
				e.add(a.href, refHasToken(a.rel, "nofollow"))
			}
		case "frame", "iframe":
			if a.hasSrc {
				e.add(a.src, false)
			}
		case "link":
			if a.hasHref && (refHasToken(a.rel, "canonical") || refHasToken(a.rel, "next") || refHasToken(a.rel, "prev") || refHasToken(a.rel, "search")) {
				e.add(a.href, refHasToken(a.rel, "nofollow"))
			}
		case "meta":
			n := strings.TrimSpace(a.name)
			if a.hasName && a.hasContent && (strings.EqualFold(n, "robots") || e.agent != "" && strings.EqualFold(n, e.agent)) {
				ni, nf := parseDirectives(a.content)
				e.out.NoIndex = e.out.NoIndex || ni
				e.out.NoFollow = e.out.NoFollow || nf
			}
		}
	}
}

func refReadAttrs(z *html.Tokenizer) refAttrs {
	var a refAttrs
	for more := true; more; {
		var k, v []byte
		k, v, more = z.TagAttr()
		switch string(k) {
		case "href":
			if !a.hasHref {
				a.href, a.hasHref = string(v), true
			}
		case "src":
			if !a.hasSrc {
				a.src, a.hasSrc = string(v), true
			}
		case "rel":
			if !a.hasRel {
				a.rel, a.hasRel = string(v), true
			}
		case "name":
			if !a.hasName {
				a.name, a.hasName = string(v), true
			}
		case "content":
			if !a.hasContent {
				a.content, a.hasContent = string(v), true
			}
		}
	}
	return a
}

func refHasToken(s, tok string) bool {
	for _, f := range strings.Fields(s) {
		if strings.EqualFold(f, tok) {
			return true
		}
	}
	return false
}
