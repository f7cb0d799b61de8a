package fetch

import (
	"bytes"
	"net/url"
	"strings"

	"golang.org/x/net/html"

	"github.com/crawl-project/crawl/internal/cssref"
	"github.com/crawl-project/crawl/internal/urlnorm"
)

// ExtractRequisites returns what a browser fetches to show a response, as Links (NoFollow is
// never set; the robots fields are left zero). For text/html and application/xhtml+xml:
// stylesheets, icons and preloads (link[href] whose rel has stylesheet, icon,
// apple-touch-icon, mask-icon, preload or modulepreload, and their imagesrcset; not the
// hyperlink rels such as search, next or alternate), scripts, images (img and
// source src and srcset, so <picture> too; input type=image; the background attribute),
// video and audio sources and posters, tracks, embeds and objects, and the url()s of style
// attributes and <style> elements; relative references resolve against <base href> as for
// ExtractLinks. For text/css: its url()s, @imports and image-set()s (internal/cssref).
// ExtractRequisites is pure and safe for concurrent use.
func ExtractRequisites(base *url.URL, contentType string, body []byte) Links {
	var out Links
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	switch {
	case mt == "text/css":
		e := extractor{out: &out, resolve: urlnorm.NewResolver(base), max: MaxLinks, seen: make(map[string]int)}
		e.css(body)
	case isHTML(mt):
		e := extractor{out: &out, resolve: urlnorm.NewResolver(findBase(base, body)), max: MaxLinks, seen: make(map[string]int)}
		e.requisites(body)
	}
	return out
}

// css adds the references of a stylesheet.
func (e *extractor) css(b []byte) {
	for _, r := range cssref.Refs(b) {
		if r.URL != "" {
			e.add(r.URL, false)
		}
	}
}

// requisiteRels are the link relations whose href a page needs to be shown: the HTML
// standard's external resources that a browser loads to render, and the icons browsers take
// as such (docs/cli.md, Requisites).
var requisiteRels = []string{"stylesheet", "icon", "apple-touch-icon", "apple-touch-icon-precomposed", "mask-icon", "preload", "modulepreload"}

// requisiteAttrs are, per element, the attributes holding one URL of a requisite.
var requisiteAttrs = map[string][]string{
	"script": {"src"},
	"img":    {"src"},
	"source": {"src"},
	"video":  {"src", "poster"},
	"audio":  {"src"},
	"track":  {"src"},
	"embed":  {"src"},
	"object": {"data"},
	"body":   {"background"},
	"table":  {"background"},
	"td":     {"background"},
	"th":     {"background"},
}

// requisites walks an HTML document with golang.org/x/net/html's tokenizer.
func (e *extractor) requisites(body []byte) {
	z := html.NewTokenizer(bytes.NewReader(body))
	inStyle := false
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return
		case html.TextToken:
			if inStyle {
				e.css(z.Text())
			}
			continue
		case html.EndTagToken:
			inStyle = false
			continue
		case html.StartTagToken, html.SelfClosingTagToken:
		default:
			continue
		}
		name, hasAttr := z.TagName()
		tag := string(name)
		inStyle = tag == "style" && tt == html.StartTagToken
		attrs := tagAttrs(z, hasAttr)
		e.tagRequisites(tag, attrs)
		if style, ok := attrs["style"]; ok {
			e.css([]byte(style))
		}
	}
}

// tagRequisites adds the requisites one start tag names.
func (e *extractor) tagRequisites(tag string, attrs map[string]string) {
	switch tag {
	case "link":
		rel := []byte(attrs["rel"])
		for _, r := range requisiteRels {
			if hasToken(rel, r) {
				if href, ok := attrs["href"]; ok {
					e.add(strings.TrimSpace(href), false)
				}
				e.srcset(attrs["imagesrcset"])
				return
			}
		}
		return
	case "input":
		if strings.EqualFold(strings.TrimSpace(attrs["type"]), "image") {
			e.addAttr(attrs, "src")
		}
		return
	case "img", "source":
		e.srcset(attrs["srcset"])
	}
	for _, a := range requisiteAttrs[tag] {
		e.addAttr(attrs, a)
	}
}

func (e *extractor) addAttr(attrs map[string]string, name string) {
	if v, ok := attrs[name]; ok && strings.TrimSpace(v) != "" {
		e.add(strings.TrimSpace(v), false)
	}
}

// srcset adds the image candidates of a srcset value, parsed as the HTML standard's algorithm
// does: a URL runs to the next whitespace (a trailing comma ends the candidate), descriptors to
// the next comma outside parentheses.
func (e *extractor) srcset(v string) {
	for i := 0; i < len(v); {
		for i < len(v) && (isSpace(v[i]) || v[i] == ',') {
			i++
		}
		start := i
		for i < len(v) && !isSpace(v[i]) {
			i++
		}
		u := v[start:i]
		ended := strings.HasSuffix(u, ",")
		u = strings.TrimRight(u, ",")
		if u != "" {
			e.add(u, false)
		}
		if ended {
			continue
		}
		i = skipDescriptors(v, i)
	}
}

// skipDescriptors returns the index just past the comma that ends the descriptors of a srcset
// candidate starting at v[i] (commas inside parentheses do not count), or len(v).
func skipDescriptors(v string, i int) int {
	for depth := 0; i < len(v); i++ {
		switch v[i] {
		case '(':
			depth++
		case ')':
			depth = max(depth-1, 0)
		case ',':
			if depth == 0 {
				return i + 1
			}
		}
	}
	return i
}

// tagAttrs reads the attributes of z's current tag (hasAttr: TagName's second result), the
// first of each name counting, as in a browser.
func tagAttrs(z *html.Tokenizer, hasAttr bool) map[string]string {
	attrs := map[string]string{}
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = z.TagAttr()
		if _, dup := attrs[string(k)]; !dup {
			attrs[string(k)] = string(v)
		}
	}
	return attrs
}
