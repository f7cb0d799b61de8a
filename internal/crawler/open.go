package crawler

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/crawl-project/crawl/aimd"
	"github.com/crawl-project/crawl/fetch"
	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/netguard"
	"github.com/crawl-project/crawl/internal/retry"
	"github.com/crawl-project/crawl/robots"
	"github.com/crawl-project/crawl/storage"
)

// Open opens (or creates) the store in cfg.Dir, widens the scope with cfg.Seeds and enqueues
// them, to crawl with cfg.WithDefaults(). Seeds already seen are not enqueued again, so Open
// on an existing store resumes.
func Open(cfg Config) (*Crawler, error) { return open(cfg, nil) }

// OpenWith opens a crawl whose frontier is fr rather than the store's own. If fr is Shared (a
// worker of a crawl shared by several), the store in cfg.Dir keeps this worker's pages and fr
// the rest, and cfg.Seeds, if any, are added to the shared crawl.
func OpenWith(cfg Config, fr Frontier) (*Crawler, error) {
	if fr == nil {
		return nil, errors.New("crawler: OpenWith needs a frontier")
	}
	return open(cfg, fr)
}

func open(cfg Config, fr Frontier) (*Crawler, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.ValidateGiven(); err != nil {
		return nil, err
	}
	var learned learnedSource
	if cfg.LearnedFrom != "" {
		var err error
		if learned, err = openLearned(cfg.LearnedFrom, cfg.Dir); err != nil {
			return nil, err
		}
	}
	c, err := openStore(cfg, fr, learned)
	if err != nil && learned != nil {
		learned.Close()
	}
	return c, err
}

// openStore is open with what Config.LearnedFrom names opened (nil without it).
func openStore(cfg Config, fr Frontier, learned learnedSource) (*Crawler, error) {
	db, err := storage.Open(cfg.Dir, &storage.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	if fr == nil {
		if fr, err = frontier.Open(db, &frontier.Options{HostBudget: cfg.MaxHostPages}); err != nil {
			db.Close()
			return nil, err
		}
	}
	sh, _ := fr.(Shared)
	var states hostlimit.StateStore = db
	if sh != nil {
		states = sh.HostStates()
	}
	if learned != nil {
		states = learnedStates{own: states, learned: learned}
	}
	res := fetch.NewResolver(fetch.ResolverConfig{Server: cfg.DNSServer})
	c := &Crawler{
		opened: opened{
			cfg:     cfg,
			log:     cfg.logger(),
			db:      db,
			learned: learned,
			fr:      fr,
			shared:  sh,
			agent:   cmp.Or(cfg.RobotsAgent, robots.AgentToken(cfg.UserAgent)),
			global:  retry.NewBudget(retry.BudgetConfig{}, time.Now()),
			gates:   newGateKeys(cfg.KeyByIP, res.LookupNetIP),
			res:     res,
			parse:   robots.FromResponse,
		},
		hostTable: hostTable{hosts: map[string]*hostRecord{}},
		dispatcher: dispatcher{
			robotsWaiting: map[string]bool{},
			idleTold:      map[string]bool{},
		},
		jitter: jitter{rnd: rand.New(rand.NewSource(time.Now().UnixNano()))},
	}
	maxActive := max(activeHostsPerWorker*cfg.Workers, minActiveHosts)
	c.sched = newSchedule(maxActive, rateInPlayShare*float64(maxActive)*cfg.InitialRate, cfg.Workers, c.turnRate)
	c.sitemaps.lim = cfg.Sitemap.orDefaults()
	if cfg.URLLog != nil {
		c.urlLog = newURLLog(cfg.URLLog, c.log)
	}
	c.reg = hostlimit.New(hostlimit.Config{AIMD: aimd.Config{
		InitialRate: cfg.InitialRate, MinRate: cfg.MinRate, MaxRate: cfg.MaxRate,
		MaxWindow: cfg.HostConcurrency,
	}, DemandByCaller: true, IdleEvict: hostIdle, MaxWindowOf: maxWindows(cfg)}, states)
	if sh != nil {
		if err := c.checkCrawlSettings(); err != nil {
			db.Close()
			return nil, err
		}
	}
	if err := c.loadScope(); err != nil {
		db.Close()
		return nil, err
	}
	guard, err := c.guard(cfg.Seeds)
	if err != nil {
		db.Close()
		return nil, err
	}
	if err := c.allowProxies(guard); err != nil {
		db.Close()
		return nil, err
	}
	auth := withAuth(cfg.Net.BasicAuth) // addSeeds adds the seeds' user:password@
	c.client = fetch.New(fetch.Config{UserAgent: cfg.UserAgent, Timeout: cfg.Timeout, MaxBody: cfg.MaxBody,
		DialControl: c.netScope(guard).Control, Resolver: res, Proxy: cfg.Net.Proxy, TLS: cfg.Net.TLS, Header: cfg.Net.Header, HostHeader: cfg.Net.HostHeader,
		BasicAuth: auth, Jar: cfg.Net.Jar})
	c.start.Kind = SharedWorker
	if sh == nil {
		cn := c.fr.Counts()
		c.start.Found = Figures{cn.Fetched, cn.Failed, cn.Excluded, cn.Queued}
		if c.start.Kind = NewCrawl; cn.Queued+cn.Fetched+cn.Failed+cn.Excluded > 0 {
			c.start.Kind = Resumed
		}
	}
	if err := c.addSeeds(cfg.Seeds, auth); err != nil {
		db.Close()
		return nil, err
	}
	if sh == nil {
		c.changes, c.revised, err = c.settle()
	} else if len(cfg.Seeds) == 0 {
		err = c.saveScope() // learn the scope the other workers' seeds set
	} else {
		_, err = sh.Settle(SeededName, "1") // the crawl holds URLs: workers without seeds may start
	}
	if err == nil && sh != nil {
		err = c.saveSharedCrawl()
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	c.warnUnmatchedHosts()
	cn := c.fr.Counts()
	c.start.Opened = Figures{cn.Fetched, cn.Failed, cn.Excluded, cn.Queued}
	if c.holdsNothing(len(cfg.Seeds) > 0, cn) {
		// e.g. the first run was killed before its seeds were committed
		db.Close()
		where := cfg.Dir
		if sh != nil {
			where = "the shared crawl"
		}
		return nil, fmt.Errorf("%s holds no URL to resume; give seed URLs or --seeds FILE (%w)", where, ErrUsage)
	}
	if sh != nil {
		sh.Join(db, c.SaveHostStates)
	}
	return c, nil
}

// holdsNothing reports whether the crawl, with counts cn, holds no URL at all. A shared crawl
// just given seeds holds them (its Add returned nil) whatever cn says: its counts come from
// Redis, and a read that failed leaves them empty.
func (c *Crawler) holdsNothing(seeded bool, cn frontier.Counts) bool {
	if c.shared != nil && seeded {
		return false
	}
	return cn.Queued+cn.Fetched+cn.Failed+cn.Excluded == 0
}

// guard builds the SSRF guard: non-public address blocks are refused at dial time unless a seed
// is on one (then its block is in scope, for this and every later run of the store) or
// --allow-private-networks is given.
func (c *Crawler) guard(seeds []string) (*netguard.Guard, error) {
	g := &netguard.Guard{AllowAll: c.cfg.AllowPrivate}
	if c.shared != nil {
		return c.sharedGuard(g, seeds)
	}
	var saved []string
	if b, ok, err := c.db.Meta("private-ranges"); err != nil {
		return nil, err
	} else if ok {
		if err := json.Unmarshal(b, &saved); err != nil {
			return nil, c.db.Damage(fmt.Sprintf("its private-ranges record does not decode: %v", err))
		}
	}
	for _, s := range saved {
		if p, err := netip.ParsePrefix(s); err == nil {
			g.Allowed = append(g.Allowed, p)
		}
	}
	n := len(g.Allowed)
	hosts := map[string]bool{}
	for _, s := range seeds {
		if u, err := url.Parse(s); err == nil {
			hosts[u.Hostname()] = true
		}
	}
	for a := range seedAddrs(c.res, hosts) {
		g.Allow(a)
	}
	if len(g.Allowed) > n {
		saved = saved[:0]
		for _, p := range g.Allowed {
			saved = append(saved, p.String())
		}
		b, _ := json.Marshal(saved)
		if err := c.db.PutMeta("private-ranges", b); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// seedLookups is how many seed host names seedAddrs looks up at once.
const seedLookups = 64

// seedAddrs returns the addresses the seeds' hosts stand for: an IP literal itself, a name what
// res says within a few seconds (nothing if the lookup fails; the crawl then reports the host's
// failure when it fetches it). Names are looked up seedLookups at a time.
func seedAddrs(res *fetch.Resolver, hosts map[string]bool) map[netip.Addr]bool {
	var mu sync.Mutex
	out := map[netip.Addr]bool{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, seedLookups)
	for host := range hosts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			addrs, _ := res.LookupNetIP(ctx, host)
			mu.Lock()
			defer mu.Unlock()
			for _, a := range addrs {
				out[a] = true
			}
		})
	}
	wg.Wait()
	return out
}

// SaveHostStates saves every in-memory host's learned state through the state store now. A
// shared frontier calls it before it hands hosts to another worker (Shared.Join).
func (c *Crawler) SaveHostStates() error { return c.reg.Flush() }

// Close saves learned host state and closes the store.
func (c *Crawler) Close() error {
	c.client.CloseIdle()
	err := c.reg.Flush()
	if cerr := c.db.Close(); err == nil {
		err = cerr
	}
	if c.learned != nil {
		if cerr := c.learned.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// maxWindows are the per-host concurrency caps of --hosts-config, by gate key: none with
// --key-by-ip, whose gates are keyed by address.
func maxWindows(cfg Config) map[string]int {
	if cfg.KeyByIP {
		return nil
	}
	m := map[string]int{}
	for host, p := range cfg.Hosts {
		if p.MaxConcurrency > 0 {
			m[host] = p.MaxConcurrency
		}
	}
	return m
}
