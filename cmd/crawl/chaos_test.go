package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crawl-project/crawl/frontier"
	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
	"go.etcd.io/bbolt"
)

// The long variant: go test ./cmd/crawl -run Chaos -chaos.kills=50 (or more).
var (
	chaosKills = flag.Int("chaos.kills", 20, "TestChaos: SIGKILLs to land mid-crawl (CI runs 20; use 50 or more for the long run)")
	chaosSeed  = flag.Int64("chaos.seed", 0, "TestChaos: random seed (0: from the clock; the seed is logged)")
)

const chaosWorkers = 8

// chaosWeb is sized so that the crawl outlasts the kills: 18 pages per host per kill.
func chaosWeb(kills int) []simweb.HostSpec {
	n := 18 * kills
	return []simweb.HostSpec{
		{Name: "a", Pages: n, Limit: 60, Burst: 4, Disallow: []string{"/private/"}, CrossLinks: []string{"b"}},
		{Name: "b", Pages: n, Limit: 50, Burst: 2, Reply: simweb.Reply429Date},
		{Name: "c", Pages: n, Workers: 4, Service: 5 * time.Millisecond},
		{Name: "d", Pages: n / 2, Limit: 40, Burst: 2, Reply: simweb.Reply503RetryAfter, Disallow: []string{"/tmp/"}},
	}
}

type stopMode int

const (
	modeKill        stopMode = iota // SIGKILL
	modeInt                         // SIGINT: finish in-flight requests, commit, exit 130
	modeTerm                        // SIGTERM: the same
	modeDoubleInt                   // SIGINT twice: exit at once, like a kill
	modeKillAtStart                 // SIGKILL within a few milliseconds of the start
)

func (m stopMode) String() string {
	return [...]string{"SIGKILL", "SIGINT", "SIGTERM", "SIGINT×2", "SIGKILL at start"}[m]
}

// TestChaos runs real `crawl run` processes on the simulated web and stops each at a random
// moment — mostly with SIGKILL, sometimes with SIGINT or SIGTERM (graceful), twice SIGINT (quit
// at once), or SIGKILL right at the start — resuming every time, until -chaos.kills SIGKILLs have
// landed mid-crawl; then lets a last run finish. After every stop the store must open cleanly
// and pass bbolt's and the frontier's consistency checks, a graceful stop must lose nothing,
// and an abrupt one at most the requests in flight (--workers). At the end every reachable
// allowed page is stored exactly once, nothing is queued or leased, the servers saw exactly as
// many duplicate fetches as responses were lost at the stops, and `crawl status` agrees with
// the servers' own counters.
func TestChaos(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns crawl processes")
	}
	kills := *chaosKills
	seed := *chaosSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -chaos.seed=%d), %d kills", seed, seed, kills)
	rnd := rand.New(rand.NewSource(seed))
	web, err := simweb.Start(chaosWeb(kills), &simweb.Options{Seed: seed, Grace: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	seeds := writeSeeds(t, web.Seeds())
	dir := t.TempDir()
	args := []string{"run", "--data", dir, "--quiet", "--workers", fmt.Sprint(chaosWorkers),
		"--initial-rate", "20", "--max-rate", "15"}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	start := time.Now()
	killed, stops := 0, map[stopMode]int{}
	lostBefore := 0 // responses served but not stored, over all stops so far
	seedsCommitted := false
	for i := 0; killed < kills; i++ {
		mode := modeKill
		switch i % 10 {
		case 2, 8:
			mode = []stopMode{modeInt, modeTerm}[i/10%2]
		case 5:
			mode = []stopMode{modeTerm, modeInt}[i/10%2]
		case 6:
			mode = []stopMode{modeDoubleInt, modeKillAtStart}[i/10%2]
		}
		a := args
		if i == 0 || !seedsCommitted || i%4 == 1 { // naming known seeds again changes nothing
			a = append(a, "--seeds", seeds)
		}
		cmd, out := crawlProcess(ctx, a...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var wait time.Duration
		switch mode {
		case modeKill, modeDoubleInt:
			wait = time.Duration(20+rnd.Intn(900)) * time.Millisecond
		case modeKillAtStart:
			wait = time.Duration(rnd.Intn(20)) * time.Millisecond
		default:
			wait = time.Duration(400+rnd.Intn(900)) * time.Millisecond
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case <-exited:
			t.Fatalf("run %d exited before its %v after %v:\n%s", i, mode, wait, out)
		case <-time.After(wait):
		}
		switch mode {
		case modeKill, modeKillAtStart:
			cmd.Process.Signal(syscall.SIGKILL)
		case modeInt:
			cmd.Process.Signal(syscall.SIGINT)
		case modeTerm:
			cmd.Process.Signal(syscall.SIGTERM)
		case modeDoubleInt:
			cmd.Process.Signal(syscall.SIGINT)
			time.Sleep(5 * time.Millisecond)
			cmd.Process.Signal(syscall.SIGINT)
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Fatalf("run %d did not exit within 30s of its %v:\n%s", i, mode, out)
		}
		ps := cmd.ProcessState
		ws, _ := ps.Sys().(syscall.WaitStatus)
		abrupt := true
		switch {
		case ps.ExitCode() == exitOK:
			t.Fatalf("run %d: the crawl finished after %d kills, before its %v; the web is too small for -chaos.kills=%d:\n%s", i, killed, mode, kills, out)
		case ws.Signaled() && ws.Signal() == syscall.SIGKILL && (mode == modeKill || mode == modeKillAtStart):
			if mode == modeKill {
				killed++
			}
		case ws.Signaled() && mode != modeKill:
			// the signal came before the crawl installed its handler: the default action killed it
			t.Logf("run %d: %v arrived before the handler was installed (%v)", i, mode, ws.Signal())
		case ps.ExitCode() == exitInterrupted && mode != modeKill && mode != modeKillAtStart:
			abrupt = mode == modeDoubleInt
			if !strings.Contains(out.String(), "interrupted") && !strings.Contains(out.String(), "quit at once") {
				t.Errorf("run %d: exit 130 without a word on stderr:\n%s", i, out)
			}
		default:
			t.Fatalf("run %d: %v, want death by %v:\n%s", i, ps, mode, out)
		}
		stops[mode]++

		// Nothing lost, nothing fetched twice beyond what was in flight.
		served := settledPages(web)
		pages, counts := inspectStore(t, dir, fmt.Sprintf("after run %d (%v)", i, mode))
		if counts.Queued+counts.Fetched+counts.Failed+counts.Excluded > 0 {
			seedsCommitted = true
		}
		stored := 0
		for u, n := range pages {
			stored += n
			if n > 1 {
				t.Errorf("after run %d: %s stored %d times", i, u, n)
			}
		}
		lost := served - stored - lostBefore // responses this stop lost
		switch {
		case lost < 0:
			t.Errorf("after run %d: %d pages stored that no server served", i, -lost)
		case !abrupt && lost > 0:
			t.Errorf("run %d: graceful %v lost %d served responses, want 0", i, mode, lost)
		case lost > chaosWorkers:
			t.Errorf("run %d: %v lost %d served responses; at most %d requests were in flight", i, mode, lost, chaosWorkers)
		}
		lostBefore += max(lost, 0)
		if testing.Verbose() {
			t.Logf("run %d: %-16v after %4dms: %4d stored, %d lost", i, mode, wait.Milliseconds(), stored, lost)
		}
	}
	t.Logf("stops %v in %v", stops, time.Since(start).Round(time.Millisecond))

	cmd, out := crawlProcess(ctx, args...)
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "crawl done") {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	t.Logf("final run: %s", strings.SplitN(out.String(), "\n", 2)[0])

	pages, counts := inspectStore(t, dir, "at the end")
	want := checkEachOnce(t, web, pages)
	if counts.Queued != 0 || counts.InFlight != 0 || counts.Delayed != 0 {
		t.Errorf("counts at the end: %+v; want nothing queued, delayed or leased", counts)
	}
	dups, early := 0, 0
	for name, s := range web.Stats() {
		dups += s.Duplicates
		early += s.InRetryAfter
		if s.RobotsViolations > 0 {
			t.Errorf("host %s: %d requests for paths robots.txt disallows", name, s.RobotsViolations)
		}
	}
	if dups != lostBefore || dups > killed*chaosWorkers+stops[modeDoubleInt]*chaosWorkers+stops[modeKillAtStart]*chaosWorkers {
		t.Errorf("servers saw %d duplicate fetches; %d responses were lost at the stops, bound %d", dups, lostBefore, (killed+stops[modeDoubleInt]+stops[modeKillAtStart])*chaosWorkers)
	}
	t.Logf("%d pages stored once each; %d fetched twice across %d kills", want, dups, killed)
	// Not asserted: a Retry-After pause shorter than 2 s is saved only with the host's other
	// learned state (every 10 s), so a run killed during one may knock again too early.
	t.Logf("%d requests arrived inside a Retry-After window the servers had announced", early)

	// crawl status (a separate process, as a user would run it) agrees with the servers.
	sc, sout := crawlProcess(ctx, "status", "--data", dir, "--json")
	sc.Stdout, sc.Stderr = sout, os.Stderr
	if err := sc.Run(); err != nil {
		t.Fatalf("crawl status: %v", err)
	}
	var st crawler.Status
	if err := json.Unmarshal(sout.Bytes(), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, sout)
	}
	if st.Running || st.Queued != 0 || st.InFlight != 0 || st.Fetched != want || st.ExcludedBy["robots"] == 0 {
		t.Errorf("status: running %v, queued %d, in flight %d, fetched %d, excluded %v; want false, 0, 0, %d, some robots",
			st.Running, st.Queued, st.InFlight, st.Fetched, st.ExcludedBy, want)
	}
	hostPages := map[string]int{}
	for _, h := range st.Hosts {
		hostPages[h.Host] = h.Pages
	}
	for name, s := range web.Stats() {
		u, _ := url.Parse(web.URL(name))
		if hostPages[u.Host] != len(s.Fetched) {
			t.Errorf("status says host %s (%s) has %d pages; its server served %d distinct pages", u.Host, name, hostPages[u.Host], len(s.Fetched))
		}
	}
}

// settledPages waits until the servers' handlers have finished (their 200 counts stop moving)
// and returns the number of page 200s they served.
func settledPages(web *simweb.Web) int {
	prev := -1
	for i := 0; i < 100; i++ {
		n := 0
		for _, s := range web.Stats() {
			for _, c := range s.Fetched {
				n += c
			}
		}
		if n == prev {
			return n
		}
		prev = n
		time.Sleep(40 * time.Millisecond)
	}
	return prev
}

// inspectStore opens the store in dir read-only, as a user would after a crash, checks bbolt's
// page structure and the frontier's invariants, and returns how many times each URL was stored
// with a 2xx status, and the frontier's counts.
func inspectStore(t *testing.T, dir, when string) (map[string]int, frontier.Counts) {
	t.Helper()
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if errors.Is(err, os.ErrNotExist) {
		return map[string]int{}, frontier.Counts{} // killed before the store was created
	}
	if err != nil {
		t.Fatalf("%s: store does not open: %v", when, err)
	}
	defer db.Close()
	if err := db.Bolt().View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}); err != nil {
		t.Fatalf("%s: bbolt check: %v", when, err)
	}
	fr, err := frontier.Open(db, nil)
	if err != nil {
		t.Fatalf("%s: frontier: %v", when, err)
	}
	if err := fr.Check(); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	pages := map[string]int{}
	if err := db.PagesMeta(func(p *storage.Page) error {
		if p.Status >= 200 && p.Status < 300 {
			pages[p.URL]++
		}
		return nil
	}); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	return pages, fr.Counts()
}

// crawlOutput runs `crawl ARGS...` to its end and returns its exit code and combined output.
func crawlOutput(t *testing.T, ctx context.Context, args ...string) (int, string) {
	t.Helper()
	cmd, out := crawlProcess(ctx, args...)
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("crawl %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), out.String()
}
