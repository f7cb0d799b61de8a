package export

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/crawl-project/crawl/storage"
)

const (
	// maxNameLen is the longest file or directory name MirrorPath produces, in bytes.
	maxNameLen = 200
	// maxPathLen is the longest relative path MirrorPath produces, in bytes.
	maxPathLen = 1000
	// indexName is the file of a directory-like URL, and where a demoted file goes.
	indexName = "index.html"
)

// MirrorWriter writes the mirror of a crawl: for each URL the body of its latest 2xx answer
// (the rendered DOM, scripts removed, for a rendered page), or a refresh page for a redirect, in files under a root directory, with links between
// mirrored files made relative; see the package documentation for the rules. It is not safe
// for concurrent use.
type MirrorWriter struct {
	root     *os.Root
	rootPath string
	plan     *mirrorPlan
	opts     MirrorOptions
	stats    Stats
	closed   bool
	made     bool     // NewMirror created the root directory
	written  []string // the files written, relative to the root, for withdraw
}

// MirrorOptions configures NewMirror. The nil *MirrorOptions means the defaults.
type MirrorOptions struct {
	// Filter selects the pages mirrored; it must be the Filter later passed to Run with the
	// writer, so that the plan and the pages written agree. nil: every page.
	Filter *Filter
	// KeepLinks writes bodies exactly as stored (crawl export --convert-links=false). By
	// default links in HTML (and CSS) to mirrored files are rewritten relative, and every
	// other http(s) link made absolute, so that the mirror browses offline.
	KeepLinks bool
}

// NewMirror returns a writer that mirrors pages under dir, creating it if needed. dir must be
// missing or empty: otherwise the error wraps ErrOutputExists. pages must yield the same
// pages, in the same order, as the Source later given to Run (metadata is enough: bodies are
// not read): NewMirror reads it once to name every file before any is written, which is what
// lets a link point to a page fetched later.
func NewMirror(dir string, pages Source, opts *MirrorOptions) (*MirrorWriter, error) {
	if dir == "" {
		return nil, errors.New("export: mirror: empty output path")
	}
	var o MirrorOptions
	if opts != nil {
		o = *opts
	}
	_, statErr := os.Lstat(dir)
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, fmt.Errorf("export: mirror: %w", err)
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("export: mirror: %w", err)
	}
	names, err := f.Readdirnames(1)
	_ = f.Close()
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("export: mirror: %w", err)
	}
	if len(names) > 0 {
		return nil, fmt.Errorf("export: mirror: %s is not empty: %w", dir, ErrOutputExists)
	}
	plan, err := buildPlan(pages, o.Filter)
	if err != nil {
		return nil, fmt.Errorf("export: mirror: planning: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("export: mirror: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		_ = root.Close()
		return nil, fmt.Errorf("export: mirror: %w", err)
	}
	return &MirrorWriter{root: root, rootPath: abs, plan: plan, opts: o, made: errors.Is(statErr, fs.ErrNotExist)}, nil
}

// Stats implements Writer.
func (m *MirrorWriter) Stats() Stats { return m.stats }

// Close releases the root directory. It is safe to call more than once.
func (m *MirrorWriter) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	return m.root.Close()
}

// withdraw ends a failed export: the files written are removed, then the directories that
// held them once empty, and the root if NewMirror created it; what someone else put there
// stays. It may be called after Close.
func (m *MirrorWriter) withdraw() {
	if m.closed {
		if r, err := os.OpenRoot(m.rootPath); err == nil {
			m.root = r
		} else {
			m.root = nil
		}
	}
	m.closed = true
	if m.root != nil {
		dirs := map[string]bool{}
		for _, rel := range m.written {
			_ = m.root.Remove(rel)
			for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
				dirs[d] = true
			}
		}
		// Deepest first: a directory is empty once its subdirectories are gone.
		order := make([]string, 0, len(dirs))
		for d := range dirs {
			order = append(order, d)
		}
		slices.SortFunc(order, func(a, b string) int { return len(b) - len(a) })
		for _, d := range order {
			_ = m.root.Remove(d) // fails, as it should, on a directory not empty
		}
		_ = m.root.Close()
	}
	if m.made {
		_ = os.Remove(m.rootPath)
	}
	m.written = nil
	m.stats.Files = 0
}

// Write writes p's file if p is the version the plan mirrors (the latest 2xx or redirect of
// its URL), and counts it as omitted otherwise (an error status, an older version). A file
// never replaces another.
func (m *MirrorWriter) Write(p *storage.Page) error {
	if m.closed {
		return ErrClosed
	}
	u := pageURL(p)
	e := m.plan.byURL[u]
	if e == nil || e.seq != p.Seq {
		m.stats.Omitted++
		return nil
	}
	body, doc := p.Body, p
	if e.kind == entryFile && p.Render != nil && p.Rendered != nil && isHTMLType(e.ctype) {
		// The page as rendered, made inert: it reads offline without its scripts.
		r := *p
		r.Body, r.Header = offlineDOM(p.Rendered), http.Header{}
		for k, v := range p.Header {
			r.Header[k] = v
		}
		r.Header.Set("Content-Type", renderedType)
		body, doc = r.Body, &r
	}
	switch {
	case e.kind == entryRedirect:
		body = refreshPage(m.link(e.rel, e.target))
	case !m.opts.KeepLinks && isHTMLType(e.ctype):
		body = m.convertHTML(doc, e.rel)
	case !m.opts.KeepLinks && e.ctype == "text/css":
		if base, err := url.Parse(pageURL(p)); err == nil {
			body = m.convertCSS(p.Body, base, e.rel)
		}
	}
	if err := m.checkLocal([]string{e.rel}); err != nil {
		return err
	}
	rel := filepath.FromSlash(e.rel)
	if d := filepath.Dir(rel); d != "." {
		if err := m.root.MkdirAll(d, dirMode); err != nil {
			return fmt.Errorf("export: mirror: %s: %w", u, err)
		}
	}
	if _, err := m.root.Lstat(rel); err == nil {
		return fmt.Errorf("export: mirror: %s: %s: %w", u, e.rel, ErrOutputExists)
	}
	// Written under a name the mapping never makes ("%%" is no escape), then linked into
	// place: a killed export leaves no file cut short under a page's name.
	tmp := filepath.Join(filepath.Dir(rel), "%%partial")
	f, err := m.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fileMode)
	if err != nil {
		return fmt.Errorf("export: mirror: %s: %w", u, err)
	}
	_, err = f.Write(body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if lerr := m.root.Link(tmp, rel); lerr != nil { // no hard links here: rename after a check
			if _, serr := m.root.Lstat(rel); serr == nil || errors.Is(lerr, fs.ErrExist) {
				err = fmt.Errorf("%s: %w", e.rel, ErrOutputExists)
			} else {
				err = m.root.Rename(tmp, rel)
			}
		}
	}
	_ = m.root.Remove(tmp)
	if err == nil {
		m.written = append(m.written, rel)
	}
	if err == nil && !p.FetchedAt.IsZero() {
		err = m.root.Chtimes(rel, p.FetchedAt, p.FetchedAt)
	}
	if err != nil {
		return fmt.Errorf("export: mirror: %s: %w", u, err)
	}
	m.stats.count(p)
	m.stats.Files++
	m.stats.Bytes += int64(len(body))
	return nil
}

// link is the reference written in the file at fromRel for the normalized URL target: the
// relative path of its mirrored file, or target itself when it is not mirrored.
func (m *MirrorWriter) link(fromRel, target string) string {
	if f := m.plan.fileOf(target); f != "" {
		return relLink(fromRel, f)
	}
	return target
}

// checkLocal verifies that the joined components stay inside the root: the safety net under
// os.Root.
func (m *MirrorWriter) checkLocal(comps []string) error {
	rel := filepath.FromSlash(path.Join(comps...))
	full := filepath.Join(m.rootPath, rel)
	r, err := filepath.Rel(m.rootPath, full)
	if err != nil || !filepath.IsLocal(r) || r != rel {
		return fmt.Errorf("export: mirror: %q: %w", rel, ErrUnsafePath)
	}
	return nil
}

// candidate is the i-th name tried for a file: name itself, then name with a suffix from the
// hash of the URL (and of i, from the third try on).
func candidate(name, rawURL string, i int) string {
	switch i {
	case 0:
		return name
	case 1:
		return shorten(addSuffix(name, "~"+shortHash(rawURL, 10)))
	default:
		return shorten(addSuffix(name, "~"+shortHash(rawURL+"#"+strconv.Itoa(i), 10)))
	}
}

// MirrorPath maps a URL to the slash-separated components of its file under the mirror root:
// the host directory, then directories, then the file name. Every component is a safe,
// non-empty file name of at most 200 bytes other than "." and ".."; see the package
// documentation for the rules. MirrorWriter may still move the file or add a suffix when
// pages clash.
func MirrorPath(rawURL string) []string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Opaque != "" {
		return []string{"%invalid", shortHash(rawURL, 32)}
	}
	host := hostKey(u)
	if h, port, ok := cutPort(host); ok {
		host = encodeName(h) + "+" + encodeName(port)
	} else {
		host = encodeName(host)
	}
	if u.Host == "" {
		host = "%nohost"
	}
	host = shorten(host) // a host name may be 253 bytes, more once encoded
	comps := []string{host}

	segs := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	file := segs[len(segs)-1]
	segs = segs[:len(segs)-1]
	for _, s := range segs {
		comps = append(comps, shorten(encodeName(unescapeSegment(s))))
	}
	if file == "" {
		file = indexName
	} else {
		file = encodeName(unescapeSegment(file))
	}
	if u.RawQuery != "" || u.ForceQuery {
		file = addSuffix(file, "~"+shortHash("?"+u.RawQuery, 10))
	}
	comps = append(comps, shorten(file))

	if n := len(strings.Join(comps, "/")); n > maxPathLen {
		return []string{host, "%long", shortHash(rawURL, 32)}
	}
	return comps
}

// cutPort splits "host:port" (IPv6 in brackets); ok is false without a port.
func cutPort(hostport string) (host, port string, ok bool) {
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 || strings.LastIndexByte(hostport, ']') > i {
		return hostport, "", false
	}
	return hostport[:i], hostport[i+1:], true
}

// unescapeSegment percent-decodes one path segment; a malformed escape leaves it as it is.
func unescapeSegment(s string) string {
	d, err := url.PathUnescape(s)
	if err != nil {
		return s
	}
	return d
}

// encodeName makes s a file name that is safe on Linux, macOS and Windows, keeping it
// readable and keeping the mapping one-to-one: every byte that is unsafe, and '%' itself,
// becomes %XX.
func encodeName(s string) string {
	switch s {
	case "":
		return "%"
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	esc := func(c byte) {
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 || r == '\uFEFF' || r >= 0x80 && r < 0xA0 {
				for j := 0; j < size; j++ {
					esc(s[i+j])
				}
			} else {
				b.WriteString(s[i : i+size])
			}
			i += size
			continue
		}
		if c < 0x20 || c == 0x7f || strings.IndexByte(`<>:"/\|?*%`, c) >= 0 {
			esc(c)
		} else if i == 0 && isDeviceName(s) {
			esc(c)
		} else if i == len(s)-1 && (c == '.' || c == ' ') {
			esc(c) // Windows drops a trailing dot or space
		} else {
			b.WriteByte(c)
		}
		i++
	}
	return b.String()
}

// isDeviceName reports whether s is a Windows reserved device name (CON, PRN, AUX, NUL, COM1-9,
// LPT1-9), alone or with an extension, in any case.
func isDeviceName(s string) bool {
	stem, _, _ := strings.Cut(s, ".")
	stem = strings.ToUpper(strings.TrimRight(stem, " "))
	switch stem {
	case "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$":
		return true
	}
	if len(stem) == 4 && (strings.HasPrefix(stem, "COM") || strings.HasPrefix(stem, "LPT")) {
		return stem[3] >= '0' && stem[3] <= '9'
	}
	return false
}

// addSuffix inserts suffix before a short extension of name (p.php -> p~x.php), or appends it.
func addSuffix(name, suffix string) string {
	if ext := shortExt(name); ext != "" {
		return name[:len(name)-len(ext)] + suffix + ext
	}
	return name + suffix
}

// shortExt is name's extension (".html") if it is 2-10 bytes of ASCII letters and digits and
// not the whole name.
func shortExt(name string) string {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 || len(name)-i < 2 || len(name)-i > 10 {
		return ""
	}
	for j := i + 1; j < len(name); j++ {
		c := name[j]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return ""
		}
	}
	return name[i:]
}

// shorten cuts a name longer than maxNameLen bytes, at a rune and %XX boundary, and appends
// "~" and 16 hex digits of the full name's SHA-256, keeping a short extension.
func shorten(name string) string {
	if len(name) <= maxNameLen {
		return name
	}
	ext := shortExt(name)
	suffix := "~" + shortHash(name, 16) + ext
	cut := maxNameLen - len(suffix)
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	// Do not split a %XX escape.
	if i := strings.LastIndexByte(name[:cut], '%'); i >= 0 && i > cut-3 {
		cut = i
	}
	return name[:cut] + suffix
}

// shortHash is the first n hex digits of s's SHA-256.
func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}
