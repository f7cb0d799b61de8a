package crawler

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/storage"
)

// Settings are the choices that shape what a crawl fetches and how politely: the one
// definition of each, which Config embeds and the public package crawler's Options fill. A
// zero field takes its default (Config.WithDefaults). The first run stores them, defaults
// filled in, in the store; a resume uses them for every flag it does not name (the command
// line's applyStored), and one that names a different value changes the stored one (Open
// re-queues or excludes the URLs the change concerns). Network options (proxies, headers,
// credentials) are not settings: they belong to one run.
//
// Their JSON form is the store's settings record (and, as CrawlSettings, a shared crawl's),
// each setting under its own key. Settings that belong together beyond these (how pages are
// rendered, say) come as one struct field of their own, under one key, with their flags added
// to Flags.
type Settings struct {
	// What is crawled.
	Scope    ScopeMode `json:"scope"`
	MaxDepth Depth     `json:"max_depth"`
	Include  Patterns  `json:"include,omitempty"` // only URLs matching one of these are crawled (none: all)
	Exclude  Patterns  `json:"exclude,omitempty"` // URLs matching one of these are not
	// AcceptTypes, if not empty, are the media types ("text/html", "text/*") of the pages
	// kept: a 2xx page of another type (by its Content-Type header) is excluded with reason
	// "type" without its body being read. robots.txt, and sitemaps with Sitemaps, are always
	// read.
	AcceptTypes []string `json:"accept_type,omitempty"`
	// DenyExt are file extensions (lowercase, no dot) whose URLs are excluded as "filter"
	// before they are requested.
	DenyExt []string `json:"deny_ext,omitempty"`
	// Requisites fetches what each page needs to be shown (stylesheets, scripts, images,
	// icons, fonts, and what stylesheets load) as requisites of the page: at its depth, their
	// own links not followed (--requisites). RequisitesScope says on which hosts.
	Requisites      bool            `json:"requisites,omitempty"`
	RequisitesScope RequisitesScope `json:"requisites_scope,omitempty"`
	// Sitemaps queues each host's sitemaps (robots.txt Sitemap lines and /sitemap.xml) and
	// follows the URLs they list (--sitemaps).
	Sitemaps bool `json:"sitemaps,omitempty"`
	// MaxPages stops the crawl after this many fetched pages, all runs together; 0: no cap.
	MaxPages int `json:"max_pages"`
	// MaxHostPages caps the URLs of one host ever queued (so fetched); further links to the
	// host are excluded with reason "limit". It bounds infinite URL spaces. 0: no cap.
	MaxHostPages int `json:"max_host_pages"`

	// How politely, and how each request is made.
	UserAgent string `json:"user_agent"`
	// RobotsAgent is the product token matched against robots.txt User-agent lines; ""
	// means the product of UserAgent (robots.AgentToken).
	RobotsAgent      string        `json:"robots_agent,omitempty"`
	HostConcurrency  int           `json:"host_concurrency"` // cap on requests in flight per host
	Timeout          time.Duration `json:"timeout"`          // per request, body included
	MaxBody          int64         `json:"max_body"`         // decoded bytes kept per response
	InitialRate      float64       `json:"initial_rate"`     // per host, req/s, before anything is learned
	MinRate          float64       `json:"min_rate"`         // per-host floor, req/s
	MaxRate          float64       `json:"max_rate"`         // per-host ceiling, req/s
	IgnoreCrawlDelay bool          `json:"ignore_crawl_delay"`
	RobotsTTL        time.Duration `json:"robots_ttl"`   // how long a fetched robots.txt is trusted
	MaxAttempts      int           `json:"max_attempts"` // attempts per URL before it fails (retryable errors only)
	// HostsConfig is the file (an absolute path) Config.Hosts was read from, "" if none:
	// stored so that a resume reads it again. Only its path is: the file may hold secrets.
	HostsConfig string `json:"hosts_config,omitempty"`

	// Render says which pages are rendered in a headless browser, and how (renderconfig.go).
	Render Render `json:"render,omitzero"`
}

// Setting is one setting as the command line names it: a flag and its values in the form the
// flag parses (several for a repeatable flag, none for a repeatable flag not given).
type Setting struct {
	Flag   string
	Values []string
	Bool   bool // a boolean flag: shown as "--sitemaps" or "--sitemaps=false"
}

// String is the setting as flags: "--max-depth 1", "--include a --include b", "--sitemaps".
func (s Setting) String() string {
	if len(s.Values) == 0 {
		return "no --" + s.Flag
	}
	if s.Bool && len(s.Values) == 1 {
		if s.Values[0] == "true" {
			return "--" + s.Flag
		}
		return "--" + s.Flag + "=" + s.Values[0]
	}
	parts := make([]string, len(s.Values))
	for i, v := range s.Values {
		parts[i] = "--" + s.Flag + " " + quoteArg(v)
	}
	return strings.Join(parts, " ")
}

// quoteArg quotes v as a shell would need it, when it needs it.
func quoteArg(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n'\"\\$`*?[]|&;<>(){}#~") {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// Flags returns the settings as command-line flags, in a fixed order.
func (s Settings) Flags() []Setting {
	f := func(v float64) []string { return []string{strconv.FormatFloat(v, 'g', -1, 64)} }
	i := func(v int) []string { return []string{strconv.Itoa(v)} }
	return append([]Setting{
		{Flag: "scope", Values: []string{s.Scope.String()}},
		{Flag: "max-depth", Values: []string{s.MaxDepth.String()}},
		{Flag: "include", Values: s.Include.Strings()},
		{Flag: "exclude", Values: s.Exclude.Strings()},
		{Flag: "accept-type", Values: s.AcceptTypes},
		{Flag: "deny-ext", Values: s.DenyExt},
		{Flag: "max-pages", Values: i(s.MaxPages)},
		{Flag: "max-host-pages", Values: i(s.MaxHostPages)},
		{Flag: "user-agent", Values: []string{s.UserAgent}},
		{Flag: "robots-agent", Values: nonEmpty(s.RobotsAgent)},
		{Flag: "host-concurrency", Values: i(s.HostConcurrency)},
		{Flag: "timeout", Values: []string{s.Timeout.String()}},
		{Flag: "max-body", Values: []string{strconv.FormatInt(s.MaxBody, 10)}},
		{Flag: "initial-rate", Values: f(s.InitialRate)},
		{Flag: "min-rate", Values: f(s.MinRate)},
		{Flag: "max-rate", Values: f(s.MaxRate)},
		boolSetting("ignore-crawl-delay", s.IgnoreCrawlDelay),
		{Flag: "robots-ttl", Values: []string{s.RobotsTTL.String()}},
		{Flag: "max-attempts", Values: i(s.MaxAttempts)},
		boolSetting("requisites", s.Requisites),
		{Flag: "requisites-scope", Values: []string{s.RequisitesScope.String()}},
		boolSetting("sitemaps", s.Sitemaps),
		{Flag: "hosts-config", Values: nonEmpty(s.HostsConfig)},
	}, s.Render.flags()...)
}

// boolSetting is the setting of a boolean flag.
func boolSetting(flag string, v bool) Setting {
	return Setting{Flag: flag, Values: []string{strconv.FormatBool(v)}, Bool: true}
}

// nonEmpty is v as a setting's values: none for "".
func nonEmpty(v string) []string {
	if v == "" {
		return nil
	}
	return []string{v}
}

// String is the settings as one line of flags.
func (s Settings) String() string {
	var parts []string
	for _, f := range s.Flags() {
		if len(f.Values) > 0 {
			parts = append(parts, f.String())
		}
	}
	return strings.Join(parts, " ")
}

// Change is one setting a resume changed.
type Change struct {
	Was, Now Setting
}

// diff returns the settings that differ between was and now, in Flags order.
func diff(was, now Settings) []Change { return diffFlags(was.Flags(), now.Flags()) }

// diffFlags returns the settings of a and b (the same flags, in one order) whose values differ.
func diffFlags(a, b []Setting) []Change {
	var out []Change
	for i := range a {
		if !slices.Equal(a[i].Values, b[i].Values) {
			out = append(out, Change{Was: a[i], Now: b[i]})
		}
	}
	return out
}

// settingsMeta is the store's settings record. RevisePending is set, with the new settings,
// before Open revises the frontier for a change, and cleared once it finished, so a run killed
// part way revises again.
type settingsMeta struct {
	Settings      Settings `json:"settings"`
	RevisePending bool     `json:"revise_pending,omitempty"`
}

const settingsKey = "settings"

// The crawl's records in the store's metadata that a run decodes: its settings, scope and
// private ranges, each JSON.
var crawlRecords = []string{settingsKey, "scope", "private-ranges"}

// CheckRecords returns an error wrapping storage.ErrDamaged, naming the store, if one of the
// crawl's records in db (settings, scope, private ranges) does not decode.
func CheckRecords(db *storage.DB) error {
	for _, key := range crawlRecords {
		b, ok, err := db.Meta(key)
		if err != nil {
			return err
		}
		if ok && !json.Valid(b) {
			return db.Damage(fmt.Sprintf("its %s record does not decode", key))
		}
	}
	_, _, err := loadSettings(db)
	return err
}

// MendRecords deletes those of the crawl's records in db that do not decode, so that the next
// run starts without them (it stores its own settings; a lost scope or private-range record
// makes it exclude what only that record allowed), and returns their names.
func MendRecords(db *storage.DB) ([]string, error) {
	var dropped []string
	for _, key := range crawlRecords {
		b, ok, err := db.Meta(key)
		if err != nil {
			return dropped, err
		}
		var m settingsMeta
		if !ok || (json.Valid(b) && (key != settingsKey || json.Unmarshal(b, &m) == nil)) {
			continue
		}
		if err := db.DeleteMeta(key); err != nil {
			return dropped, err
		}
		dropped = append(dropped, key)
	}
	return dropped, nil
}

func loadSettings(db *storage.DB) (settingsMeta, bool, error) {
	var m settingsMeta
	b, ok, err := db.Meta(settingsKey)
	if err != nil || !ok {
		return m, false, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, false, db.Damage(fmt.Sprintf("its settings record does not decode: %v", err))
	}
	return m, true, nil
}

func saveSettings(db *storage.DB, m settingsMeta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return db.PutMeta(settingsKey, b)
}

// ReadSettings returns the settings stored in the crawl store in dir, and whether there are
// any (a store made before settings were kept has none). It fails if a crawl holds the store.
func ReadSettings(dir string) (Settings, bool, error) {
	db, err := storage.Open(dir, &storage.Options{Timeout: 200 * time.Millisecond, ReadOnly: true})
	if err != nil {
		return Settings{}, false, err // ErrLocked names the process holding the store
	}
	defer db.Close()
	return StoredSettings(db)
}

// StoredSettings is ReadSettings of an open store.
func StoredSettings(db *storage.DB) (Settings, bool, error) {
	m, ok, err := loadSettings(db)
	if err != nil {
		return Settings{}, false, err
	}
	return m.Settings, ok, nil
}

// revisingFlags are the settings whose change re-queues or excludes URLs already seen.
var revisingFlags = []string{"scope", "max-depth", "include", "exclude", "deny-ext", "accept-type", "max-host-pages",
	"requisites", "requisites-scope"}

// revises reports whether changes from the stored settings was concern URLs already seen. A
// change of --max-pages does only after a run with --requisites, the one way a spent budget
// sets queued pages aside (see pageBudget); otherwise it would walk every URL for nothing.
func revises(changes []Change, was Settings) bool {
	for _, ch := range changes {
		if slices.Contains(revisingFlags, ch.Now.Flag) || ch.Now.Flag == "max-pages" && was.Requisites {
			return true
		}
	}
	return false
}

// settle compares the settings of this run with the stored ones, stores this run's, and when a
// change concerns URLs already seen (scope, depth, filters, host budget) revises the frontier:
// URLs excluded only by the old value are queued again, queued URLs the new value excludes are
// excluded with its reason. It returns the changes, for the command line to report.
func (c *Crawler) settle() ([]Change, frontier.Revised, error) {
	now := c.cfg.Settings
	old, ok, err := loadSettings(c.db)
	if err != nil {
		return nil, frontier.Revised{}, fmt.Errorf("store %s: %w", c.cfg.Dir, err)
	}
	var changes []Change
	revise := old.RevisePending || c.cfg.RetryFailed || c.cfg.RetryExcluded || c.cfg.Recrawl
	if ok {
		changes = diff(old.Settings, now)
		revise = revise || revises(changes, old.Settings)
		for _, ch := range changes {
			c.typesChanged = c.typesChanged || ch.Now.Flag == "accept-type"
		}
	}
	if !revise {
		return changes, frontier.Revised{}, saveSettings(c.db, settingsMeta{Settings: now})
	}
	if err := saveSettings(c.db, settingsMeta{Settings: now, RevisePending: true}); err != nil {
		return nil, frontier.Revised{}, err
	}
	if c.recrawl, err = planRecrawl(&c.cfg, c.db, time.Now()); err != nil {
		return nil, frontier.Revised{}, err
	}
	rev, err := c.revise()
	if err != nil {
		return nil, rev, err
	}
	return changes, rev, saveSettings(c.db, settingsMeta{Settings: now})
}

// revisable returns the frontier as a Revisable, or an error saying that what needs it
// cannot be done with this frontier.
func (c *Crawler) revisable(what string) (Revisable, error) {
	fr, ok := c.fr.(Revisable)
	if !ok {
		return nil, fmt.Errorf("%s needs a frontier that can revise the URLs it has seen, and this crawl's cannot (%w)", what, ErrUsage)
	}
	return fr, nil
}

// reasonType excludes a page whose media type --accept-type does not accept.
const reasonType = "type"

// settingReasons are the exclusion reasons a setting gives, which a changed setting may lift.
var settingReasons = []string{frontier.ReasonScope, frontier.ReasonFilter, frontier.ReasonDepth, frontier.ReasonLimit}

// retryReasons are the exclusion reasons --retry excluded lifts besides the settings' own:
// robots.txt is checked again when the URL is leased, the address guard when it is dialled.
var retryReasons = []string{frontier.ReasonRobots, frontier.ReasonPrivateAddress}

// revisit decides, under this run's settings, what becomes of a URL already seen: a queued URL
// the settings exclude is excluded; a URL excluded for scope, filter, depth or host budget that
// they admit is queued again (a redirect chain over the limit stays excluded; robots.txt is
// checked again when it is leased); with --retry, failed URLs they admit, and URLs excluded by
// robots.txt or a private address, are queued again; with --recrawl, fetched URLs they admit
// are revisited (all, or those --older-than names).
func (c *Crawler) revisit(r frontier.URLRecord) frontier.Verdict {
	u, err := url.Parse(r.URL)
	if err != nil {
		return frontier.Verdict{}
	}
	reason, detail := c.admit(u, r.Depth, r.Role)
	requeue := frontier.Verdict{Action: frontier.Requeue}
	switch {
	case r.State == "queued" && reason != "":
		return frontier.Verdict{Action: frontier.Exclude, Reason: reason, Detail: detail}
	case reason != "":
	case c.recrawl.due(r):
		return frontier.Verdict{Action: frontier.Revisit}
	case r.State == "failed" && c.cfg.RetryFailed:
		return requeue
	case r.State != "excluded":
	case r.Reason == frontier.ReasonLimit && strings.HasPrefix(r.Detail, "more than"): // a redirect or requisite chain
	case slices.Contains(settingReasons, r.Reason):
		return requeue
	case c.cfg.RetryExcluded && slices.Contains(retryReasons, r.Reason):
		return requeue
	case r.Reason == reasonType && (c.typesChanged || c.cfg.RetryExcluded):
		return requeue // fetched again, its type is checked against the new --accept-type
	}
	return frontier.Verdict{}
}

// admit returns "" when the settings admit u at depth in role, else the exclusion reason
// (scope, filter, depth) and its detail. A requisite is admitted only with --requisites, and
// on the hosts --requisites-scope names.
func (c *Crawler) admit(u *url.URL, depth int, role frontier.Role) (reason, detail string) {
	if role == frontier.RoleRequisite {
		if !c.cfg.Requisites {
			return frontier.ReasonScope, "a page requisite, and --requisites is off"
		}
		if reason := c.scopeNow().CheckRequisite(u, c.cfg.RequisitesScope == RequisitesScopeAny); reason != "" {
			return reason, ""
		}
	} else if reason := c.scopeNow().Check(u); reason != "" {
		return reason, ""
	}
	if c.cfg.Hooks.InScope != nil && !c.cfg.Hooks.InScope(u) {
		return frontier.ReasonFilter, "out of the program's scope (Hooks.InScope)"
	}
	if hops, capped := c.cfg.MaxDepth.Hops(); capped && depth > hops {
		return frontier.ReasonDepth, fmt.Sprintf("depth %d > --max-depth %d", depth, hops)
	}
	return "", ""
}

// Changes returns the settings this run changed from those stored by the last run, and what
// the changes did to the URLs already seen.
func (c *Crawler) Changes() ([]Change, frontier.Revised) { return c.changes, c.revised }

// seedHosts returns the host keys of the crawl's seeds (URLs of depth 0 that nothing linked to),
// sorted: the scope of --scope host. It needs a Revisable frontier.
func (c *Crawler) seedHosts() ([]string, error) {
	fr, err := c.revisable("a changed --scope")
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	err = fr.Walk(func(r frontier.URLRecord) error {
		if r.Depth == 0 && r.Parent == "" {
			if u, err := url.Parse(r.URL); err == nil && u.Host != "" {
				set[urlnorm.HostKey(u)] = true
			}
		}
		return nil
	})
	out := make([]string, 0, len(set))
	for h := range set {
		out = append(out, h)
	}
	sort.Strings(out)
	return out, err
}
