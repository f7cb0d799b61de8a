package crawler

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/crawl-project/crawl/frontier"
	engine "github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/fleet"
	"github.com/crawl-project/crawl/internal/urlnorm"
	"github.com/crawl-project/crawl/storage"
)

// ErrInterrupted is returned (wrapped) by Run when its context ended before the crawl did.
// Everything fetched so far is kept; Run again on the same DataDir resumes.
var ErrInterrupted = engine.ErrInterrupted

// Scope says which hosts a crawl stays on: the crawl command's --scope.
type Scope = engine.ScopeMode

const (
	// ScopeHost keeps the crawl on the seeds' hosts (the zero value).
	ScopeHost = engine.ScopeHost
	// ScopeDomain keeps it on the seeds' registrable domains (example.com and its subdomains).
	ScopeDomain = engine.ScopeDomain
)

// Render says which pages are rendered in a headless browser, and with what: the crawl
// command's --render, --render-timeout, --render-tabs and --browser.
type Render = engine.Render

// RenderMode says which pages are rendered.
type RenderMode = engine.RenderMode

const (
	// RenderNever renders no page and starts no browser (the zero value).
	RenderNever = engine.RenderNever
	// RenderAuto renders the pages whose HTML is an application shell: a script, little text.
	RenderAuto = engine.RenderAuto
	// RenderAlways renders every HTML page.
	RenderAlways = engine.RenderAlways
)

// Options say what to crawl and where to keep it. The zero value of every field but DataDir
// works: a field left zero takes the default the crawl command has. Each setting is the field
// of the same name of the crawl's settings, which the crawl command's flags set and its store
// keeps; New copies them as they are, a zero taking its default there.
type Options struct {
	// Seeds are the URLs the crawl starts from; a URL without a scheme gets https. They may be
	// empty when DataDir holds a crawl to resume.
	Seeds []string
	// DataDir is where the crawl is kept; required. It is created if missing.
	DataDir string

	Scope Scope
	// InScope, if set, must also admit every URL the crawl would queue (links, redirects,
	// sitemap URLs); it is asked from several goroutines at once.
	InScope func(u *url.URL) bool
	// MaxDepth caps link hops from a seed; 0 means no cap (the crawl command's --max-depth -1).
	MaxDepth int
	// MaxPages stops the crawl after this many fetched pages, all runs together; 0: no cap.
	MaxPages int
	// MaxHostPages caps the URLs of one host ever queued; 0: no cap.
	MaxHostPages int

	// UserAgent is sent with every request; "" sends the crawl command's default, which asks
	// the operator to name themselves. Set it to name your crawler and a contact.
	UserAgent string
	// Workers caps requests in flight in all; 0 means 32.
	Workers int
	// HostConcurrency caps requests in flight to one host; 0 means 8.
	HostConcurrency int
	// InitialRate is each host's rate, requests/s, before anything is learned; 0 means 2.
	InitialRate float64
	// MaxRate caps every host's rate, requests/s; 0 means 1000.
	MaxRate float64
	// Timeout bounds one request, body included; 0 means 30 s.
	Timeout time.Duration
	// Hosts sets options for particular hosts, by host name ("example.com", "example.com:8080").
	Hosts map[string]HostOptions

	// Requisites also fetches what each page needs to be shown (stylesheets, scripts, images,
	// fonts), as wget's --page-requisites does.
	Requisites bool
	// Sitemaps follows each host's sitemaps (robots.txt Sitemap lines and /sitemap.xml).
	Sitemaps bool

	// Render renders pages in a headless Chromium (Render.Mode), every request of theirs sent
	// through the crawl (robots.txt, the address guard, the host's rate, the store), and keeps
	// the rendered DOM beside the HTML, which Page.Doc reads; links are taken from both. The
	// zero value renders nothing. Render.Browser "" looks for Chromium or Chrome on PATH.
	Render Render

	// Redis, if set, makes this Crawler one worker of a crawl shared through Redis, Valkey or a
	// Redis Cluster (redis://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…]/DB, or rediss:// for TLS):
	// the frontier is in Redis, each host is crawled by one worker at a time, and DataDir keeps
	// this worker's pages. Run returns when the whole shared crawl is done.
	Redis string
	// Crawl names the shared crawl to join or start; "" means "default".
	Crawl string

	// Logger receives the crawl's log; nil discards it.
	Logger *slog.Logger
}

// HostOptions override the crawl's options for one host. The zero value changes nothing.
type HostOptions struct {
	// MaxRate caps the host's rate, requests/s, below what the crawl would learn; 0: no cap.
	MaxRate float64
	// MaxConcurrency caps the host's requests in flight; 0: no cap of its own.
	MaxConcurrency int
	// IgnoreRobots neither fetches nor obeys the host's robots.txt: for a host you own.
	IgnoreRobots bool
}

// Crawler is one crawl over one DataDir. Set its hooks, then Run it; a Crawler is run once at a
// time.
type Crawler struct {
	cfg    engine.Config
	shared *sharedCrawl // Options.Redis; nil for a crawl of one's own

	mu      sync.Mutex // guards the fields below
	hooks   hooks
	running bool
}

// hooks are the functions a Crawler calls; Run takes a copy, so that setting one during a run
// changes nothing until the next.
type hooks struct {
	call    *sync.Mutex // held while one of them runs: they are called one at a time
	onPage  []func(*Page)
	onLink  []func(*Link) bool
	onEvent []func(Event)
}

// New checks o and returns a Crawler for it. It opens nothing: Run does.
func New(o Options) (*Crawler, error) {
	if o.DataDir == "" {
		return nil, errors.New("crawler: Options.DataDir is required")
	}
	seeds, bad := engine.ParseSeedArgs(o.Seeds)
	if len(bad) > 0 {
		return nil, fmt.Errorf("crawler: Options.Seeds: %v", bad[0])
	}
	if o.MaxDepth < 0 || o.MaxPages < 0 || o.MaxHostPages < 0 {
		return nil, errors.New("crawler: Options.MaxDepth, MaxPages and MaxHostPages must not be negative")
	}
	if o.Scope != ScopeHost && o.Scope != ScopeDomain {
		return nil, fmt.Errorf("crawler: Options.Scope %d is not ScopeHost or ScopeDomain", o.Scope)
	}
	cfg := engine.Config{
		Settings: engine.Settings{
			Scope: o.Scope, MaxDepth: engine.Depth(o.MaxDepth), MaxPages: o.MaxPages, MaxHostPages: o.MaxHostPages,
			Requisites: o.Requisites, Sitemaps: o.Sitemaps, Render: o.Render,
			UserAgent: o.UserAgent, HostConcurrency: o.HostConcurrency,
			InitialRate: o.InitialRate, MaxRate: o.MaxRate, Timeout: o.Timeout,
		},
		Dir: o.DataDir, Seeds: seeds, Workers: o.Workers, Log: o.Logger,
		Hooks: engine.Hooks{InScope: o.InScope},
	}
	if len(o.Hosts) > 0 {
		cfg.Hosts = make(map[string]engine.HostPolicy, len(o.Hosts))
		for name, h := range o.Hosts {
			key, err := hostKey(name)
			if err != nil {
				return nil, fmt.Errorf("crawler: Options.Hosts: %w", err)
			}
			p := engine.HostPolicy{MaxRate: h.MaxRate, MaxConcurrency: h.MaxConcurrency}
			if h.IgnoreRobots {
				p.Robots = engine.RobotsIgnored
			}
			cfg.Hosts[key] = p
		}
	}
	cfg = cfg.WithDefaults()
	cfg.InitialRate = min(cfg.InitialRate, cfg.MaxRate) // a MaxRate below the default InitialRate
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("crawler: %w", err)
	}
	c := &Crawler{cfg: cfg}
	if o.Redis != "" {
		t, err := fleet.ParseTarget(o.Redis)
		if err != nil {
			return nil, fmt.Errorf("crawler: Options.Redis %w", err)
		}
		c.shared = &sharedCrawl{target: t, name: cmp.Or(o.Crawl, "default")}
	}
	return c, nil
}

// sharedCrawl is the crawl shared through Redis that a Crawler joins (Options.Redis).
type sharedCrawl struct {
	target fleet.Target
	name   string
}

// open joins the shared crawl and opens the loop on its frontier; leave, called once the loop
// is closed, hands the worker's hosts back to the others.
func (s *sharedCrawl) open(ctx context.Context, cfg engine.Config) (e *engine.Crawler, leave func() error, err error) {
	rdb, err := s.target.Dial(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	w, err := fleet.Join(ctx, rdb, s.name, fleet.NewWorkerID(), &fleet.Options{HostBudget: cfg.MaxHostPages, RobotsTTL: cfg.RobotsTTL},
		fleet.FrontierOptions{Log: cfg.Log, Data: cfg.Dir, Redis: s.target.String(), Crawl: s.name})
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	leave = func() error {
		lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := w.Leave(lctx)
		return errors.Join(err, rdb.Close())
	}
	if e, err = engine.OpenWith(cfg, w.Frontier); err != nil {
		leave()
		return nil, nil, err
	}
	return e, leave, nil
}

// hostKey turns a host name (with an optional port) into the crawl's host key.
func hostKey(name string) (string, error) {
	u, err := url.Parse("http://" + name + "/")
	if err != nil || u.Host == "" || u.Path != "/" || u.User != nil {
		return "", fmt.Errorf("%q is not a host name", name)
	}
	return urlnorm.HostKey(u), nil
}

// OnPage calls fn with each page fetched, once the page is stored. Functions set by OnPage,
// OnLink and OnEvent are called one at a time, in the order they were set, and the crawl
// waits for them; set them before Run (one set during a run applies from the next).
func (c *Crawler) OnPage(fn func(*Page)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hooks.onPage = append(c.hooks.onPage, fn)
}

// OnLink asks fn about each link of a fetched page (but nofollow ones), before the crawl's own
// checks (scope, depth, robots.txt, URLs already seen): false drops it, recorded as excluded
// with reason "filter". A URL that several pages link to may be asked about more than once.
func (c *Crawler) OnLink(fn func(*Link) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hooks.onLink = append(c.hooks.onLink, fn)
}

// OnEvent calls fn with the crawl's events, for metrics: each request that ended, each retry
// scheduled, and about once a second the crawl's progress.
func (c *Crawler) OnEvent(fn func(Event)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hooks.onEvent = append(c.hooks.onEvent, fn)
}

// Run crawls until nothing in scope is left, Options.MaxPages is reached, or ctx ends (then
// it returns an error wrapping ErrInterrupted, and the next Run on DataDir resumes).
func (c *Crawler) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("crawler: Run is already running")
	}
	c.running = true
	cfg := c.cfg
	h := hooks{call: new(sync.Mutex), onPage: slices.Clip(c.hooks.onPage),
		onLink: slices.Clip(c.hooks.onLink), onEvent: slices.Clip(c.hooks.onEvent)}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running = false
		c.mu.Unlock()
	}()

	if len(h.onPage) > 0 {
		cfg.Hooks.Stored = h.stored
	}
	if len(h.onLink) > 0 {
		cfg.Hooks.Link = h.link
	}
	e, leave, err := c.open(ctx, cfg)
	if err != nil {
		return namedDamage(cfg.Dir, fmt.Errorf("crawler: %w", err))
	}
	if len(h.onEvent) > 0 {
		e.SetObserver(observer{h})
	}
	_, runErr := e.Run(ctx)
	if err := e.Close(); err != nil && runErr == nil {
		runErr = err
	}
	if err := leave(); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return namedDamage(cfg.Dir, fmt.Errorf("crawler: %w", runErr))
	}
	return nil
}

// namedDamage returns err, naming the store file in dir if err wraps storage.ErrDamaged
// without naming it: damage always says which file is damaged.
func namedDamage(dir string, err error) error {
	path := filepath.Join(dir, storage.FileName)
	if errors.Is(err, storage.ErrDamaged) && !strings.Contains(err.Error(), path) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return err
}

// open opens the crawl loop on the crawl's frontier: the store's own, or a shared crawl's.
func (c *Crawler) open(ctx context.Context, cfg engine.Config) (*engine.Crawler, func() error, error) {
	if c.shared != nil {
		return c.shared.open(ctx, cfg)
	}
	e, err := engine.Open(cfg)
	return e, func() error { return nil }, err
}

func (h hooks) stored(p *storage.Page, role frontier.Role) {
	h.call.Lock()
	defer h.call.Unlock()
	pg := pageOf(p, role)
	for _, fn := range h.onPage {
		fn(pg)
	}
}

func (h hooks) link(from, to *url.URL, depth int) bool {
	h.call.Lock()
	defer h.call.Unlock()
	l := &Link{From: from, URL: to, Depth: depth}
	for _, fn := range h.onLink {
		if !fn(l) {
			return false
		}
	}
	return true
}

// pageOf is the Page of a stored one, fetched in role.
func pageOf(p *storage.Page, role frontier.Role) *Page {
	return &Page{URL: p.URL, FinalURL: p.FinalURL, Status: p.Status, Header: p.Header,
		ContentType: p.ContentType, Body: p.Body, Depth: p.Depth, Parent: p.Parent,
		FetchedAt: p.FetchedAt, Truncated: p.Truncated, Requisite: role == frontier.RoleRequisite,
		Render: p.Render, Rendered: p.Rendered, Subresource: p.Subresource}
}

// Page is one fetched response: a page, a redirect, an error page, a requisite or a
// sub-resource of a rendered page. It and its Body may be kept after the OnPage call.
type Page struct {
	URL         string // the URL requested (normalized)
	FinalURL    string // the URL answered: URL, unless the request was redirected inside fetch
	Status      int
	Header      http.Header
	ContentType string // media type, lowercase, without parameters
	// Body is the decoded body, cut at the crawl's body limit (then Truncated is true).
	Body      []byte
	Truncated bool
	Depth     int    // link hops from a seed
	Parent    string // the page that linked here; "" for a seed
	FetchedAt time.Time
	// Requisite says the URL was fetched as another page's requisite (Options.Requisites).
	Requisite bool
	// Render is set iff the page was rendered in a browser: then Rendered holds its DOM as the
	// browser left it (UTF-8), which Doc reads, and Body the document as the server sent it.
	Render   *storage.RenderInfo
	Rendered []byte
	// Subresource says the response was fetched for the browser rendering the page Parent
	// names (a script, a style sheet, an image, an API call), not as a page of the crawl.
	Subresource bool

	once sync.Once
	doc  *goquery.Document
	err  error
}

// Doc parses the page as HTML, once: later calls return the same document. A rendered page
// (Render set) is its rendered DOM, any other its body. It is safe for concurrent use.
func (p *Page) Doc() (*goquery.Document, error) {
	p.once.Do(func() {
		src := p.Body
		if p.Render != nil {
			src = p.Rendered
		}
		p.doc, p.err = goquery.NewDocumentFromReader(bytes.NewReader(src))
		if p.err == nil {
			if u, err := url.Parse(p.FinalURL); err == nil {
				p.doc.Url = u
			}
		}
	})
	return p.doc, p.err
}

// Link is a link found on a fetched page.
type Link struct {
	From  *url.URL // the page it was found on
	URL   *url.URL // where it leads (normalized; do not modify)
	Depth int      // link hops from a seed to URL
}

// EventKind says what an Event reports.
type EventKind int

const (
	// EventRequest: a request ended (a page, a redirect hop or a robots.txt).
	EventRequest EventKind = iota + 1
	// EventRetry: a URL was scheduled for another attempt.
	EventRetry
	// EventProgress: the crawl's counts, about once a second and at the end.
	EventProgress
)

// Event is something the crawl did, for metrics.
type Event struct {
	Kind EventKind
	Host string // EventRequest, EventRetry: the host

	// EventRequest:
	Robots  bool          // a robots.txt request
	Status  int           // HTTP status; 0 when the request ended without a response
	ErrKind string        // when Status is 0: "timeout", "conn-refused", …
	Latency time.Duration // from sending the request until its body was read

	// EventRetry: why ("status-429", "timeout", …).
	Reason string

	// EventProgress: URL counts, all runs together.
	Fetched, Failed, Excluded, Queued int
}

type observer struct{ h hooks }

func (o observer) emit(e Event) {
	o.h.call.Lock()
	defer o.h.call.Unlock()
	for _, fn := range o.h.onEvent {
		fn(e)
	}
}

func (o observer) Request(e engine.RequestEvent) {
	o.emit(Event{Kind: EventRequest, Host: e.Host, Robots: e.Robots, Status: e.Status, ErrKind: e.ErrKind, Latency: e.Latency})
}

func (o observer) Retry(host, reason string) {
	o.emit(Event{Kind: EventRetry, Host: host, Reason: reason})
}

func (observer) BudgetExhausted(string, string)    {}
func (observer) LimiterWait(string, time.Duration) {}

func (o observer) Tick(t engine.Tick) {
	s := t.Status
	o.emit(Event{Kind: EventProgress, Fetched: s.Fetched, Failed: s.Failed, Excluded: s.Excluded, Queued: s.Queued})
}
