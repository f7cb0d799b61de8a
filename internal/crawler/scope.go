package crawler

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/urlnorm"
)

// Scope decides which URLs a crawl may fetch. It is plain data built from the seeds and flags.
type Scope struct {
	Mode    ScopeMode       // host: the seeds' host keys; domain: their registrable domains
	Allowed map[string]bool // host keys (mode host) or registrable domains (mode domain)
	Include []*regexp.Regexp
	Exclude []*regexp.Regexp
	DenyExt []string // file extensions, lowercase without the dot, whose URLs are not crawled
}

// AddSeed widens the scope to cover a seed URL.
func (s *Scope) AddSeed(u *url.URL) {
	if s.Allowed == nil {
		s.Allowed = map[string]bool{}
	}
	s.Allowed[s.key(u)] = true
}

func (s *Scope) key(u *url.URL) string {
	if s.Mode == ScopeDomain {
		return urlnorm.Registrable(u.Hostname())
	}
	return urlnorm.HostKey(u)
}

// Check returns "" when u is in scope, else the exclusion reason ("scope" or "filter").
func (s *Scope) Check(u *url.URL) string {
	if !s.Allowed[s.key(u)] {
		return "scope"
	}
	return s.filter(u, s.Include)
}

// CheckRequisite is Check for a page requisite: on any host when anyHost is set, else on the
// hosts (or domains) of the scope; --exclude applies, --include (which picks pages) does not.
func (s *Scope) CheckRequisite(u *url.URL, anyHost bool) string {
	if !anyHost && !s.Allowed[s.key(u)] {
		return "scope"
	}
	return s.filter(u, nil)
}

// filter returns "filter" when u matches no include (if there are any) or an exclude.
func (s *Scope) filter(u *url.URL, include []*regexp.Regexp) string {
	str := u.String()
	if len(include) > 0 {
		ok := false
		for _, re := range include {
			if re.MatchString(str) {
				ok = true
				break
			}
		}
		if !ok {
			return "filter"
		}
	}
	for _, re := range s.Exclude {
		if re.MatchString(str) {
			return "filter"
		}
	}
	if len(s.DenyExt) > 0 && slices.Contains(s.DenyExt, extension(u.Path)) {
		return "filter"
	}
	return ""
}

// extension is the lowercased extension of the last segment of urlPath, without the dot
// ("/a/b.PDF" → "pdf"), or "".
func extension(urlPath string) string {
	return strings.ToLower(strings.TrimPrefix(path.Ext(path.Base(urlPath)), "."))
}

// acceptsType reports whether the media type mt is one of types ("text/html") or under one of
// their wildcards ("text/*", "*/*").
func acceptsType(types []string, mt string) bool {
	major, _, _ := strings.Cut(mt, "/")
	for _, t := range types {
		if t == mt || t == "*/*" || strings.HasSuffix(t, "/*") && strings.TrimSuffix(t, "/*") == major {
			return true
		}
	}
	return false
}

// warnUnmatchedHosts warns about each --hosts-config host outside the crawl's scope: its
// settings apply to no page (only to requisites, when they are fetched from any host).
func (c *Crawler) warnUnmatchedHosts() {
	var out []string
	for host := range c.cfg.Hosts {
		if c.scope.Check(&url.URL{Scheme: "http", Host: host, Path: "/"}) == frontier.ReasonScope {
			out = append(out, host)
		}
	}
	sort.Strings(out)
	for _, host := range out {
		c.log.Warn("--hosts-config names a host outside the crawl's scope; its settings apply to no page of the crawl",
			"host", host, "file", c.cfg.HostsConfig)
	}
}

type scopeMeta struct {
	Mode    string   `json:"mode"` // a ScopeMode, as text
	Allowed []string `json:"allowed"`
}

// loadScope restores the scope a previous run of this store used, so a resume without --seeds
// keeps crawling the same hosts. A run with the other --scope derives its allowed set from the
// seeds: their registrable domains, or their hosts.
func (c *Crawler) loadScope() error {
	c.scope = Scope{Mode: c.cfg.Scope, Include: c.cfg.Include, Exclude: c.cfg.Exclude, DenyExt: c.cfg.DenyExt, Allowed: map[string]bool{}}
	if c.shared != nil {
		return nil // saveScope merges this worker's seeds with the shared crawl's
	}
	b, ok, err := c.db.Meta("scope")
	if err != nil || !ok {
		return err
	}
	var m scopeMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return c.db.Damage(fmt.Sprintf("its scope record does not decode: %v", err))
	}
	if m.Mode != c.cfg.Scope.String() {
		hosts, err := c.seedHosts()
		if err != nil {
			return err
		}
		for _, h := range hosts {
			c.scope.AddSeed(&url.URL{Host: h})
		}
		return c.saveScope()
	}
	for _, k := range m.Allowed {
		c.scope.Allowed[k] = true
	}
	return nil
}

// saveScope stores the scope, for the next run (a shared crawl's: merges it with the other
// workers').
func (c *Crawler) saveScope() error {
	if c.shared != nil {
		return c.mergeScope()
	}
	m := scopeMeta{Mode: c.scope.Mode.String()}
	for k := range c.scope.Allowed {
		m.Allowed = append(m.Allowed, k)
	}
	sort.Strings(m.Allowed)
	b, _ := json.Marshal(m)
	return c.db.PutMeta("scope", b)
}
