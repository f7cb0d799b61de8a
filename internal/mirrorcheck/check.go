package mirrorcheck

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/net/html"

	"github.com/crawl-project/crawl/internal/cssref"
)

// Report is what Check found.
type Report struct {
	Files  int      // files in the mirror
	Links  int      // relative links checked
	Broken []string // "FILE: LINK" for each link that names no file of the mirror
	// Absolute lists "FILE: URL" for each absolute http(s) link to the host the file belongs
	// to: a mirror with converted links should have none for pages it holds.
	Absolute []string
}

// linkAttrs are the attributes holding a URL that a browser follows or loads.
var linkAttrs = map[string]bool{"href": true, "src": true, "poster": true, "data": true, "background": true}

// Check walks the mirror under root and checks the links of every .html and .css file.
func Check(root string) (Report, error) {
	var r Report
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		r.Files++
		isCSS := strings.HasSuffix(p, ".css")
		if !isCSS && !strings.HasSuffix(p, ".html") && !strings.HasSuffix(p, ".htm") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		refs := htmlRefs(body)
		if isCSS {
			refs = cssRefs(body)
		}
		for _, ref := range refs {
			r.check(root, rel, ref)
		}
		return nil
	})
	return r, err
}

func (r *Report) check(root, rel, ref string) {
	ref = strings.TrimSpace(ref)
	if ref == "" || strings.HasPrefix(ref, "#") {
		return
	}
	u, err := url.Parse(ref)
	if err != nil {
		r.Broken = append(r.Broken, fmt.Sprintf("%s: %s (%v)", rel, ref, err))
		return
	}
	if u.Scheme != "" || u.Host != "" {
		host, _, _ := strings.Cut(rel, "/")
		if (u.Scheme == "http" || u.Scheme == "https") && strings.ReplaceAll(u.Host, ":", "+") == host {
			r.Absolute = append(r.Absolute, rel+": "+ref)
		}
		return
	}
	r.Links++
	target := path.Join(path.Dir(rel), u.Path) // u.Path is percent-decoded, as a file name
	if strings.HasPrefix(target, "../") || target == ".." {
		r.Broken = append(r.Broken, rel+": "+ref+" (leaves the mirror)")
		return
	}
	fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(target)))
	if err != nil || !fi.Mode().IsRegular() {
		r.Broken = append(r.Broken, rel+": "+ref)
	}
}

// htmlRefs returns the URLs of an HTML document's link and requisite attributes, srcset
// candidates included, and of its style attributes and <style> elements.
func htmlRefs(body []byte) []string {
	var refs []string
	z := html.NewTokenizer(bytes.NewReader(body))
	inStyle := false
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return refs
		}
		if tt == html.TextToken && inStyle {
			refs = append(refs, cssRefs(z.Text())...)
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			inStyle = false
			continue
		}
		t := z.Token()
		inStyle = t.Data == "style" && tt == html.StartTagToken
		if t.Data == "base" || t.Data == "form" {
			continue
		}
		for _, a := range t.Attr {
			switch {
			case a.Key == "style":
				refs = append(refs, cssRefs([]byte(a.Val))...)
			case linkAttrs[a.Key]:
				refs = append(refs, a.Val)
			case a.Key == "srcset":
				for _, c := range strings.Split(a.Val, ",") {
					if f := strings.Fields(c); len(f) > 0 {
						refs = append(refs, f[0])
					}
				}
			}
		}
	}
}

// cssRefs returns the URLs a stylesheet loads: url()s and @imports (internal/cssref tokenizes;
// the rewriting the checker judges is the mirror's own).
func cssRefs(b []byte) []string {
	var refs []string
	for _, r := range cssref.Refs(b) {
		refs = append(refs, r.URL)
	}
	return refs
}
