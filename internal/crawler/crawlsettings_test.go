package crawler

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/internal/urlnorm"
)

// A worker given no seeds that opened before the seeds' address block reached the shared
// crawl (workers started together: it read the crawl's blocks before another worker's seeds
// put theirs in) still fetches the hosts on it: before it refuses an address it reads the
// crawl's blocks again. Nothing is excluded private-address.
func TestSharedGuardTakesBlocksAddedAfterOpen(t *testing.T) {
	t.Parallel()
	web, err := simweb.Start(simweb.Small(), nil) // its hosts are on 127.0.0.1
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	sh := newSharedFake(t)
	// What a seeded worker has put in the crawl when this one opens: its scope and its seeds,
	// not yet its block (in the crawl, the block goes in first; this worker read the set
	// before).
	sh.values["scope-mode"] = "host"
	var entries []frontier.Entry
	for _, s := range web.Seeds() {
		u, err := urlnorm.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		sh.sets["scope-allowed"] = append(sh.sets["scope-allowed"], urlnorm.HostKey(u))
		entries = append(entries, frontier.Entry{URL: u.String(), Host: urlnorm.HostKey(u)})
	}
	if _, err := sh.Add(entries); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, web)
	cfg.Seeds = nil
	c, err := OpenWith(cfg, sh)
	if err != nil {
		t.Fatal(err)
	}
	sh.mu.Lock()
	sh.sets["private-ranges"] = []string{"127.0.0.0/8"} // the seeded worker's block arrives
	sh.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a safety net
	defer cancel()
	sum, err := c.Run(ctx)
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	if err != nil || sum.StopReason != "done" {
		t.Fatalf("Run: %v, %+v", err, sum)
	}
	if n := sh.Counts().ExcludedBy[frontier.ReasonPrivateAddress]; n > 0 {
		t.Errorf("%d URLs excluded private-address; the crawl's blocks held their address", n)
	}
	checkComplete(t, web, cfg.Dir, 0)
}

// A worker whose settings are not its shared crawl's is refused, naming the crawl's and its
// own; one with the crawl's joins; the first worker given seeds stores its settings.
func TestSharedCrawlSettingsRefuseAnother(t *testing.T) {
	web, err := simweb.Start(simweb.Small(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	sh := newSharedFake(t)
	first := testConfig(t, web)
	first.MaxRate, first.MaxHostPages = 30, 100
	c, err := OpenWith(first, sh)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	stored, err := DecodeCrawlSettings(sh.values[CrawlSettingsName])
	if err != nil || stored.MaxRate != 30 || stored.MaxHostPages != 100 {
		t.Fatalf("stored settings %+v, %v; want the first worker's", stored, err)
	}
	for _, seeded := range []bool{true, false} {
		other := testConfig(t, web)
		if !seeded {
			other.Seeds = nil
		}
		_, err := OpenWith(other, sh)
		var conflict *SettingsConflict
		if !errors.As(err, &conflict) || !errors.Is(err, ErrUsage) ||
			!strings.Contains(err.Error(), "--max-rate 30, not --max-rate 1000") || !strings.Contains(err.Error(), "--max-host-pages 100, not --max-host-pages 0") {
			t.Errorf("seeded %v: a worker with the default --max-rate and --max-host-pages: %v; want a SettingsConflict naming both", seeded, err)
		}
		same := testConfig(t, web)
		same.MaxRate, same.MaxHostPages = 30, 100
		same.Workers = 3 // the worker's own
		if !seeded {
			same.Seeds = nil
		}
		c, err := OpenWith(same, sh)
		if err != nil {
			t.Errorf("seeded %v: a worker with the crawl's settings: %v", seeded, err)
			continue
		}
		c.Close()
	}
}

// A settings record read from Redis is checked as a command line's flags are: what none could
// give is refused with what is wrong, never used.
func TestDecodeCrawlSettingsRefusesHostile(t *testing.T) {
	cfg := Defaults()
	good := cfg.CrawlSettings()
	if got, err := DecodeCrawlSettings(EncodeCrawlSettings(good)); err != nil || len(good.Diff(got)) > 0 {
		t.Fatalf("a good record: %+v, %v", got, err)
	}
	bad := func(f func(*CrawlSettings)) string {
		s := good
		f(&s)
		return EncodeCrawlSettings(s)
	}
	for _, tc := range []struct{ name, record, want string }{
		{"not JSON", "\x18partitions=1", "bad settings record"},
		{"huge", `{"scope":"` + strings.Repeat("a", maxCrawlSettings) + `"}`, "more than"},
		{"unknown field", `{"scope":"host","evil":1}`, "unknown field"},
		{"two records", EncodeCrawlSettings(good) + EncodeCrawlSettings(good), "data after"},
		{"negative rate", bad(func(s *CrawlSettings) { s.MaxRate = -1 }), "--max-rate"},
		{"NaN-like rate", `{"scope":"host","max_rate":1e400}`, "bad settings record"},
		{"zero timeout", bad(func(s *CrawlSettings) { s.Timeout = 0 }), "--timeout"},
		{"huge concurrency", bad(func(s *CrawlSettings) { s.HostConcurrency = math.MaxInt32 }), "--host-concurrency"},
		{"bad scope", `{"scope":"world"}`, "--scope"},
		{"bad pattern", `{"scope":"host","include":["("]}`, "pattern"},
		{"bad depth", `{"scope":"host","max_depth":-2}`, "--max-depth"},
		{"bad requisites scope", `{"scope":"host","requisites_scope":"planet"}`, "--requisites-scope"},
		{"hosts config", bad(func(s *CrawlSettings) { s.HostsConfig = "/etc/passwd" }), "--hosts-config"},
		{"control in agent", bad(func(s *CrawlSettings) { s.UserAgent = "a\x1b[2Jb" }), "--user-agent"},
		{"short robots ttl", bad(func(s *CrawlSettings) { s.RobotsTTL = time.Nanosecond }), "--robots-ttl"},
	} {
		if _, err := DecodeCrawlSettings(tc.record); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
}
