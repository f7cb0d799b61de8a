package crawler

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/storage"
)

// Status is the crawl's state as `crawl status --json` prints it. The JSON field names are a
// documented, stable interface (README "crawl status"): scripts rely on them. Add fields; never
// rename or remove one.
type Status struct {
	Running    bool           `json:"running"`    // a crawl process holds the store right now
	UpdatedAt  time.Time      `json:"updated_at"` // when this snapshot was taken
	Fetched    int            `json:"fetched"`
	Failed     int            `json:"failed"`
	Excluded   int            `json:"excluded"`
	Queued     int            `json:"queued"`    // waiting, including URLs delayed for a retry
	InFlight   int            `json:"in_flight"` // leased to a fetcher right now
	FailedBy   map[string]int `json:"failed_by"`
	ExcludedBy map[string]int `json:"excluded_by"`
	// Dropped counts the URLs over their host's --max-host-pages that were counted, not
	// recorded (frontier.Counts.Dropped): in none of the states above.
	Dropped int `json:"dropped,omitempty"`
	// Hosts are the hosts contacted (see snapshot), busiest first: most pages fetched plus failed,
	// then most requests in this run, then by name. The hosts only linked to are counted in
	// HostsNotCrawled, not listed.
	Hosts []HostStatus `json:"hosts"`
	// HostsNotCrawled counts the hosts that URLs were queued or excluded for but that were never
	// contacted; HostsNotCrawledQueued of them have URLs queued (they wait for a first request).
	// URLs with no host (mailto:, javascript: …) belong to no host and are not counted.
	HostsNotCrawled       int `json:"hosts_not_crawled"`
	HostsNotCrawledQueued int `json:"hosts_not_crawled_queued"`
	// HostsNotListed counts the hosts contacted but left out of Hosts, the least busy: a
	// running crawl lists its busiest few hundred.
	HostsNotListed int `json:"hosts_not_listed,omitempty"`
	// HostsFailed counts the hosts contacted that served nothing and failed (every request
	// failed, or the last error is all there is); Hosts lists at least FailedListed of them, if there are.
	HostsFailed int `json:"hosts_failed,omitempty"`
	// Run holds the running crawl's request counters since it started (absent when no crawl
	// process made requests: crawl status on a stopped store).
	Run *RunCounters `json:"run,omitempty"`
	// Render holds the crawl's rendering figures, all runs together (absent when its settings
	// render no page).
	Render *RenderCounts `json:"render,omitempty"`
	// Settings are the crawl's settings in force (absent for a store made before they were
	// kept).
	Settings *Settings `json:"settings,omitempty"`
	// Shared names the crawl shared by several workers that this store is a worker's of
	// (absent for a crawl of its own). Its URL counts are then the fleet's while the worker
	// runs, and zero once it stopped: crawl status --redis shows the fleet.
	Shared *SharedCrawl `json:"shared,omitempty"`
}

// HostStatus is one host's line in Status.
type HostStatus struct {
	Host         string  `json:"host"`
	Pages        int     `json:"pages"` // fetched
	Queued       int     `json:"queued"`
	Failed       int     `json:"failed"`
	Excluded     int     `json:"excluded"`
	Rate         float64 `json:"rate"`            // req/s the controller allows now
	Window       int     `json:"window"`          // concurrency window now
	Phase        string  `json:"phase,omitempty"` // the controller's phase (aimd.Phase: slow-start, refusal-run, return, search, probe)
	InFlight     int     `json:"in_flight"`
	P95Ms        float64 `json:"p95_ms"`
	BaselineMs   float64 `json:"baseline_ms"`
	AcceptedRate float64 `json:"accepted_rate"`
	OverLimit    int     `json:"over_limit"` // "slow down" replies seen (429, 503 and their kin)
	// RetryBudget is the host's retry token balance (absent until the host's first retry or
	// success in this run); retries pause when it runs dry.
	RetryBudget *float64   `json:"retry_budget,omitempty"`
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
}

// statusFile is where a running crawl leaves its latest Status, since bbolt's file lock keeps
// other processes out of the store while it runs.
const statusFile = "status.json"

// writeStatus replaces DIR/status.json atomically (write to a temp file, then rename).
func writeStatus(dir string, st Status) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".status-*.json")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, statusFile))
}

// ReadStatusFile reads the snapshot a running (or the last) crawl left in dir.
func ReadStatusFile(dir string) (Status, error) {
	var st Status
	b, err := os.ReadFile(filepath.Join(dir, statusFile))
	if errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("%s: no status snapshot yet (is this a crawl data directory?)", dir)
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", filepath.Join(dir, statusFile), err)
	}
	return st, nil
}

// listedHosts bounds the hosts the crawl's own snapshots list (the busiest; the others are
// counted in HostsNotListed): one is taken every second and one at the end of a run, and a broad
// crawl has 100,000 hosts. crawl status on a stopped store lists them all.
var listedHosts = 200

// FailedListed is how many hosts whose every request failed a snapshot lists at least (if there
// are as many), however little they were used: as many as a run's summary names.
const FailedListed = 15

// snapshot reports the crawl: the frontier's counts and the hosts contacted, busiest first, at
// most list of them (0: all), with their gates' figures.
func (c *Crawler) snapshot(running bool, list int) Status {
	now := time.Now()
	cn := c.fr.Counts()
	st := Status{
		Running: running, UpdatedAt: now,
		Fetched: cn.Fetched, Failed: cn.Failed, Excluded: cn.Excluded, Queued: cn.Queued, InFlight: cn.InFlight,
		FailedBy: cn.FailedBy, ExcludedBy: cn.ExcludedBy, Dropped: cn.Dropped,
	}
	if st.Run = c.ob.run(running); st.Run != nil {
		st.Run.Pages = c.tally().Fetched
	}
	if c.shared != nil {
		redis, crawl := c.shared.Where()
		st.Shared = &SharedCrawl{Redis: redis, Crawl: crawl}
	}
	if c.cfg.Dir != "" {
		s := c.cfg.Settings
		st.Settings = &s
	}
	if c.cfg.Render.Mode != RenderNever {
		st.Render = c.renders.counts.counts(c.cfg.Render.Mode)
	}
	var gates map[string]hostlimit.HostStats // every gate's figures; while running, only the listed hosts' are read
	if !running {
		gates = map[string]hostlimit.HostStats{}
		for _, h := range c.reg.Stats(now) {
			gates[h.Host] = h
		}
	}
	hl := c.ob.hostList
	if !running || !now.Before(c.ob.relistAt) {
		hl = c.listHosts(running, list, gates)
		if running {
			c.ob.hostList, c.ob.relistAt = hl, now.Add(relistEvery(hl.scanned))
		}
	}
	st.Hosts = slices.Clone(hl.hosts)
	st.HostsNotCrawled, st.HostsNotCrawledQueued = hl.notCrawled, hl.notCrawledQueued
	st.HostsNotListed, st.HostsFailed = hl.notListed, hl.failed
	for i := range st.Hosts {
		gate := c.gates.known(st.Hosts[i].Host)
		switch g, ok := gates[gate]; {
		case ok:
			setGate(&st.Hosts[i], g, now)
		case !running: // a gate that left memory: its figures are in the store
			setGate(&st.Hosts[i], c.reg.Load(now, gate), now)
		default:
			if g, ok := c.reg.Host(now, gate); ok {
				setGate(&st.Hosts[i], g, now)
			}
		}
	}
	return st
}

// hostList is the part of a snapshot that scans every host the frontier knows: the hosts
// listed, with their frontier counters and records but not their gates' figures, and the
// counts of the others.
type hostList struct {
	hosts                        []HostStatus
	notCrawled, notCrawledQueued int
	notListed, failed            int
	scanned                      int // hosts scanned
}

// relistEvery is how long a running crawl's snapshots keep the hosts they list (and those
// hosts' counters) before scanning n hosts again: every second up to 20,000 hosts, then a
// second more per 20,000, at most 30 s, so that the scan stays a small part of a broad crawl's
// work. Totals and the listed gates' figures are read afresh every time.
func relistEvery(n int) time.Duration {
	return min(time.Duration(n/20_000)*time.Second, 30*time.Second)
}

// listHosts picks the hosts contacted, busiest first, at most list of them (0: all); gates, if
// not nil, holds every gate's figures (otherwise a running crawl's gates in memory are asked).
func (c *Crawler) listHosts(running bool, list int, gates map[string]hostlimit.HostStats) hostList {
	var hl hostList
	type pick struct {
		i      int    // in hosts
		req    uint64 // requests admitted by its gate in this run: the order's tie-break
		failed bool   // it served nothing and failed (Status.HostsFailed)
	}
	hosts := c.fr.Hosts()
	hl.scanned = len(hosts)
	var picks []pick
	c.mu.Lock()
	for i, h := range hosts {
		if h.Host == "" {
			continue
		}
		seen := h.Fetched+h.Failed > 0 || h.InFlight > 0
		failed := h.Fetched == 0 && (h.Failed > 0 || h.LastError != "")
		if r := c.hosts[h.Host]; r != nil && r.lastErr != "" {
			seen, failed = true, h.Fetched == 0
		}
		var req uint64
		gate := c.gates.known(h.Host)
		if g, ok := gates[gate]; ok {
			req, seen = g.Admitted, seen || gateUsed(g)
		} else if running {
			if n, ok := c.reg.Admitted(gate); ok {
				req, seen = n, seen || n > 0
			}
		}
		if !seen {
			hl.notCrawled++
			if h.Queued > 0 {
				hl.notCrawledQueued++
			}
			continue
		}
		picks = append(picks, pick{i: i, req: req, failed: failed})
		if failed {
			hl.failed++
		}
	}
	slices.SortFunc(picks, func(a, b pick) int {
		ha, hb := &hosts[a.i], &hosts[b.i]
		return busier(ha.Fetched+ha.Failed, hb.Fetched+hb.Failed, a.req, b.req, ha.Host, hb.Host)
	})
	if list > 0 && len(picks) > list {
		// The least busy left out, but the first FailedListed that failed stay: the summary
		// names them.
		kept, room := picks[:list], FailedListed
		for _, p := range kept {
			if p.failed {
				room--
			}
		}
		for _, p := range picks[list:] {
			if room <= 0 {
				break
			}
			if p.failed {
				kept = append(kept, p)
				room--
			}
		}
		hl.notListed = len(picks) - len(kept)
		picks = kept
	}
	hl.hosts = make([]HostStatus, 0, len(picks))
	for _, p := range picks {
		h := hosts[p.i]
		hs := HostStatus{Host: h.Host, Pages: h.Fetched, Queued: h.Queued, Failed: h.Failed, Excluded: h.Excluded, LastError: h.LastError}
		if r := c.hosts[h.Host]; r != nil {
			if r.lastErr != "" {
				hs.LastError = r.lastErr
			}
			if r.budget != nil {
				v := r.budget.Balance()
				hs.RetryBudget = &v
			}
		}
		hl.hosts = append(hl.hosts, hs)
	}
	c.mu.Unlock()
	return hl
}

// setGate fills hs with its gate's figures.
func setGate(hs *HostStatus, g hostlimit.HostStats, now time.Time) {
	hs.Rate, hs.Window, hs.InFlight, hs.Phase = g.Rate, g.Window, g.InFlight, g.Phase.String()
	hs.P95Ms, hs.BaselineMs = ms(g.P95), ms(g.Baseline)
	hs.AcceptedRate, hs.OverLimit = g.AcceptedRate, g.OverLimit
	if g.PausedUntil.After(now) {
		p := g.PausedUntil
		hs.PausedUntil = &p
	}
}

// gateUsed reports whether a gate's figures show a request made through it: one admitted or
// in flight, a reply counted, a latency learned (kept between runs) or a pause.
func gateUsed(g hostlimit.HostStats) bool {
	return g.Admitted > 0 || g.InFlight > 0 || g.OverLimit+g.Failures+g.Neutral > 0 ||
		g.Baseline > 0 || g.P95 > 0 || !g.PausedUntil.IsZero()
}

// busier orders hosts a and b busiest first: by pages fetched or failed, then requests, then
// name.
func busier(aDone, bDone int, aReq, bReq uint64, aHost, bHost string) int {
	return cmp.Or(cmp.Compare(bDone, aDone), cmp.Compare(bReq, aReq), strings.Compare(aHost, bHost))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// publishStatus takes a snapshot, writes it to DIR/status.json and calls the progress hook.
func (c *Crawler) publishStatus(running bool) Status {
	st := c.snapshot(running, listedHosts)
	if err := writeStatus(c.cfg.Dir, st); err != nil {
		c.log.Warn("cannot write status file", "err", err)
	}
	c.observed(st)
	if c.cfg.Progress != nil {
		c.cfg.Progress(st)
	}
	return st
}

// ReadStatus reports the crawl in dir. When a crawl process holds the store it returns that
// process's latest snapshot (DIR/status.json, at most a second or so old) with Running set;
// otherwise it reads the store itself.
func ReadStatus(dir string) (Status, error) {
	if _, err := os.Stat(filepath.Join(dir, "crawl.db")); err != nil {
		return Status{}, fmt.Errorf("%s is not a crawl data directory (no crawl.db)", dir)
	}
	db, err := storage.Open(dir, &storage.Options{Timeout: 100 * time.Millisecond, ReadOnly: true})
	if errors.Is(err, storage.ErrLocked) {
		st, ferr := ReadStatusFile(dir)
		if ferr != nil {
			return st, fmt.Errorf("store is in use by a running crawl, and %w", ferr)
		}
		st.Running = true
		return st, nil
	}
	if err != nil {
		return Status{}, err
	}
	defer db.Close()
	fr, err := frontier.Open(db, nil)
	if err != nil {
		return Status{}, err
	}
	c := &Crawler{opened: opened{db: db, fr: fr, reg: hostlimit.New(hostlimit.Config{}, db)}}
	now := time.Now()
	for _, h := range fr.Hosts() {
		if h.Host != "" {
			c.reg.Load(now, h.Host) // the learned state saved by the last run
		}
	}
	st := c.snapshot(false, 0)
	if m, ok, err := loadSettings(db); err != nil {
		return st, fmt.Errorf("store %s: %w", dir, err)
	} else if ok {
		st.Settings = &m.Settings
		if mode := m.Settings.Render.Mode; mode != RenderNever {
			if st.Render, err = storedRenderCounts(db, mode); err != nil {
				return st, fmt.Errorf("store %s: %w", dir, err)
			}
		}
	}
	if st.Shared, err = loadSharedCrawl(db); err != nil {
		return st, fmt.Errorf("store %s: %w", dir, err)
	}
	return st, nil
}
