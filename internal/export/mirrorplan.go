package export

import (
	"mime"
	"net/url"
	"path"
	"strings"

	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/storage"
)

// entryKind is what the mirror holds for a URL.
type entryKind uint8

const (
	// entryFile: the URL's latest answer was a 2xx; its body is the file.
	entryFile entryKind = iota + 1
	// entryRedirect: the URL's latest answer was a redirect; the file is a small HTML page
	// that sends the browser to the target.
	entryRedirect
)

// planned is one URL of the mirror: the version of it that is written and where.
type planned struct {
	seq    uint64 // the page version written (storage.Page.Seq)
	kind   entryKind
	rel    string // slash path under the mirror root
	target string // entryRedirect: the normalized target URL
	ctype  string // media type of the file
}

// maxRedirectChain bounds how many redirects a link is followed through to its file.
const maxRedirectChain = 10

// mirrorPlan assigns every URL of the mirror its file before any is written, so that links
// can be rewritten to files of pages that come later in fetch order. It holds one entry per
// URL and one per path: memory grows with the number of URLs, not with their bodies.
type mirrorPlan struct {
	byURL map[string]*planned
	// taken holds every planned path, case-folded (so the mirror also works on a
	// case-insensitive file system), marked as directory or file.
	taken map[string]nodeKind
	// fileOwner is the entry of each planned file path (case-folded), for demotions.
	fileOwner map[string]*planned
}

type nodeKind uint8

const (
	nodeDir nodeKind = iota + 1
	nodeFile
)

// latestVersion is the one fact per URL the plan needs from its latest version.
type latestVersion struct {
	url    string
	seq    uint64
	status int
	ctype  string
	target string // redirects: resolved and normalized Location ("" if none or unusable)
}

// buildPlan reads the pages' metadata (bodies are not needed) and plans the mirror: for each
// URL its latest version counts (a 304 is not a version: the stored body stands); a 2xx
// becomes a file named after its URL and Content-Type, a redirect with a usable Location a
// refresh page, anything else nothing. Names are given in fetch order of the latest versions.
func buildPlan(src Source, f *Filter) (*mirrorPlan, error) {
	latest := map[string]*latestVersion{}
	var order []*latestVersion
	err := src(func(p *storage.Page) error {
		if !f.Match(p) || p.Status == 304 {
			return nil
		}
		v := &latestVersion{url: pageURL(p), seq: p.Seq, status: p.Status, ctype: mediaType(p)}
		if p.Status >= 300 && p.Status < 400 {
			v.target = redirectTarget(p)
		}
		latest[v.url] = v // pages come in fetch order: the last one seen is the latest
		order = append(order, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	pl := &mirrorPlan{byURL: map[string]*planned{}, taken: map[string]nodeKind{}, fileOwner: map[string]*planned{}}
	for _, v := range order {
		if latest[v.url] != v {
			continue // superseded by a later version
		}
		e := &planned{seq: v.seq, ctype: v.ctype}
		switch {
		case v.status >= 200 && v.status < 300:
			e.kind = entryFile
		case v.target != "" && v.target != v.url:
			e.kind, e.ctype = entryRedirect, "text/html"
		default:
			continue
		}
		e.target = v.target
		pl.place(v.url, e)
	}
	return pl, nil
}

// place gives e a path for rawURL and records it. A directory URL and its index.html ("/d/"
// and "/d/index.html"), both HTML, are one page as web servers serve them: the second takes
// the first's file (whose version is written) instead of a file of its own.
func (pl *mirrorPlan) place(rawURL string, e *planned) {
	if o := pl.byURL[indexTwin(rawURL)]; o != nil && o.kind == entryFile && e.kind == entryFile &&
		o.ctype == "text/html" && e.ctype == "text/html" {
		pl.byURL[rawURL] = o
		return
	}
	comps := MirrorPath(rawURL)
	comps[len(comps)-1] = adjustExt(comps[len(comps)-1], e.ctype)
	dir := comps[:len(comps)-1]
	for i := range dir {
		p := path.Join(dir[:i+1]...)
		k := fold(p)
		switch pl.taken[k] {
		case nodeDir:
			continue
		case nodeFile:
			// An earlier file stands where a directory is needed (/a, then /a/b): it becomes
			// the directory's index. Nothing can be planned under a file, so the name is free.
			owner := pl.fileOwner[k]
			delete(pl.fileOwner, k)
			owner.rel = path.Join(p, indexName)
			pl.taken[fold(owner.rel)] = nodeFile
			pl.fileOwner[fold(owner.rel)] = owner
		}
		pl.taken[k] = nodeDir
	}
	base := path.Join(dir...)
	for i := 0; ; i++ {
		rel := path.Join(base, candidate(comps[len(comps)-1], rawURL, i))
		if pl.taken[fold(rel)] == nodeDir {
			// A directory is already there (/a/b came before /a): the page is its index.
			rel = path.Join(rel, candidate(indexName, rawURL, i))
		}
		if _, used := pl.taken[fold(rel)]; used {
			continue
		}
		e.rel = rel
		pl.taken[fold(rel)] = nodeFile
		pl.fileOwner[fold(rel)] = e
		pl.byURL[rawURL] = e
		return
	}
}

// indexTwin returns the other spelling of a directory page: "/d/index.html" for "/d/" and back,
// or "" for any other URL (one with a query included).
func indexTwin(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.RawQuery != "" || u.ForceQuery {
		return ""
	}
	switch {
	case strings.HasSuffix(u.Path, "/"):
		u.Path += indexName
	case strings.HasSuffix(u.Path, "/"+indexName):
		u.Path = strings.TrimSuffix(u.Path, indexName)
	default:
		return ""
	}
	u.RawPath = ""
	return u.String()
}

// fold is the key under which a path is reserved: two paths that differ only in case are one
// name on macOS and Windows.
func fold(p string) string { return strings.ToLower(p) }

// fileOf returns the mirrored file that rawURL (normalized) ends at, following redirects
// planned in the mirror, or "" if it is not mirrored.
func (pl *mirrorPlan) fileOf(rawURL string) string {
	for range maxRedirectChain {
		e := pl.byURL[rawURL]
		switch {
		case e == nil:
			return ""
		case e.kind == entryFile:
			return e.rel
		}
		rawURL = e.target
	}
	return ""
}

// redirectTarget is p's Location resolved against its URL and normalized as the crawler does,
// or "" when there is none or it is unusable.
func redirectTarget(p *storage.Page) string {
	loc := p.Header.Get("Location")
	if loc == "" {
		return ""
	}
	base, err := url.Parse(pageURL(p))
	if err != nil {
		return ""
	}
	u, err := urlnorm.Resolve(base, loc)
	if err != nil {
		return ""
	}
	u.User = nil
	return u.String()
}

// mediaType is p's media type, lowercased, without parameters.
func mediaType(p *storage.Page) string {
	if p.ContentType != "" {
		return strings.ToLower(p.ContentType)
	}
	mt, _, err := mime.ParseMediaType(p.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return strings.ToLower(mt)
}

// typeExts lists, per media type, the extensions a mirrored file of that type may keep; the
// first is added when the name has none of them, so that a browser reading the mirror from
// disk (which knows types only by extension) shows the file as what it is.
var typeExts = map[string][]string{
	"text/html":                {".html", ".htm"},
	"application/xhtml+xml":    {".xhtml", ".html", ".htm"},
	"text/css":                 {".css"},
	"text/javascript":          {".js", ".mjs"},
	"application/javascript":   {".js", ".mjs"},
	"application/x-javascript": {".js", ".mjs"},
	"text/plain":               {".txt"},
	"application/json":         {".json"},
	"application/pdf":          {".pdf"},
	"image/png":                {".png"},
	"image/jpeg":               {".jpg", ".jpeg"},
	"image/gif":                {".gif"},
	"image/webp":               {".webp"},
	"image/avif":               {".avif"},
	"image/svg+xml":            {".svg"},
	"image/x-icon":             {".ico"},
	"image/vnd.microsoft.icon": {".ico"},
	"font/woff":                {".woff"},
	"font/woff2":               {".woff2"},
	"font/ttf":                 {".ttf"},
	"font/otf":                 {".otf"},
	"application/font-woff":    {".woff"},
}

// adjustExt makes name end in an extension that matches the media type ctype: a page at /a is
// a.html, a stylesheet at /s?v=2 is s~HASH.css. A name that already has a fitting extension,
// or a type not in the table, is left alone; the directory index index.html takes the type's
// extension instead (index.css).
func adjustExt(name, ctype string) string {
	exts, ok := typeExts[ctype]
	if !ok {
		return name
	}
	ext := strings.ToLower(shortExt(name))
	for _, e := range exts {
		if ext == e {
			return name
		}
	}
	if strings.HasPrefix(name, "index") && ext == ".html" {
		return shorten(name[:len(name)-len(ext)] + exts[0])
	}
	return shorten(name + exts[0])
}

// relLink is the relative URL reference from the file at fromRel to the file at toRel (both
// slash paths under the mirror root), with every segment percent-encoded: file names may hold
// '%' and non-ASCII letters, and the page holding the link may not be UTF-8.
func relLink(fromRel, toRel string) string {
	var from []string
	if d := path.Dir(fromRel); d != "." {
		from = strings.Split(d, "/")
	}
	to := strings.Split(toRel, "/")
	i := 0
	for i < len(from) && i < len(to)-1 && from[i] == to[i] {
		i++
	}
	var b strings.Builder
	for range len(from) - i {
		b.WriteString("../")
	}
	for j, s := range to[i:] {
		if j > 0 {
			b.WriteByte('/')
		}
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}
