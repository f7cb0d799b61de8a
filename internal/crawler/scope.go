package crawler

import (
	"net/url"
	"regexp"

	"github.com/crawl-project/crawl/internal/urlnorm"
)

// Scope decides which URLs a crawl may fetch. It is plain data built from the seeds and flags.
type Scope struct {
	Mode    string          // "host" (the seeds' host keys) or "domain" (their registrable domains)
	Allowed map[string]bool // host keys (mode host) or registrable domains (mode domain)
	Include []*regexp.Regexp
	Exclude []*regexp.Regexp
}

// AddSeed widens the scope to cover a seed URL.
func (s *Scope) AddSeed(u *url.URL) {
	if s.Allowed == nil {
		s.Allowed = map[string]bool{}
	}
	s.Allowed[s.key(u)] = true
}

func (s *Scope) key(u *url.URL) string {
	if s.Mode == "domain" {
		return urlnorm.Registrable(u.Hostname())
	}
	return urlnorm.HostKey(u)
}

// Check returns "" when u is in scope, else the exclusion reason ("scope" or "filter").
func (s *Scope) Check(u *url.URL) string {
	if !s.Allowed[s.key(u)] {
		return "scope"
	}
	str := u.String()
	if len(s.Include) > 0 {
		ok := false
		for _, re := range s.Include {
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
	return ""
}
