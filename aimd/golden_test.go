package aimd

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"hash"
	"math"
	"math/rand"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden.txt from the controller's behaviour now")

// trail is a digest of a controller's decisions: after every outcome its Rate() (exact bits),
// Window() and phase, every 50 outcomes its Stats(), and at the end its State().
type trail struct {
	h     hash.Hash
	steps int
	last  string
}

func newTrail() *trail { return &trail{h: sha256.New()} }

// note records c after one outcome; a nil trail records nothing.
func (tr *trail) note(c *Controller) {
	if tr == nil {
		return
	}
	var b [8 + 2*4]byte
	binary.LittleEndian.PutUint64(b[0:], math.Float64bits(c.Rate()))
	binary.LittleEndian.PutUint32(b[8:], uint32(c.Window()))
	binary.LittleEndian.PutUint32(b[12:], uint32(c.phase))
	tr.h.Write(b[:])
	tr.steps++
	if tr.steps%50 == 0 {
		fmt.Fprintf(tr.h, "%+v", c.Stats())
	}
	tr.last = fmt.Sprintf("rate=%.6g window=%d phase=%s", c.Rate(), c.Window(), c.phase)
}

// end records c's State and returns the trail's golden line.
func (tr *trail) end(c *Controller) string {
	s, _ := json.Marshal(c.State())
	tr.h.Write(s)
	return fmt.Sprintf("%d %s %s", tr.steps, hex.EncodeToString(tr.h.Sum(nil))[:24], tr.last)
}

// goldenScenarios are the deterministic streams the golden file pins: the simulations of
// sim_test.go (closed loop: the controller's decisions shape the stream),
// hosts failing at random or under load (controller_test.go's driver), stated limits, demand
// labels, restored and hinted starts, and an open-loop stream of random outcomes with every
// field set, ceilings, restores and out-of-order times.
func goldenScenarios() map[string]func(*trail) *Controller {
	sc := map[string]func(*trail) *Controller{}
	sim := func(name string, c simConfig) {
		sc["sim/"+name] = func(tr *trail) *Controller {
			c.trail = tr
			return runSim(c).ctrl
		}
	}
	for _, h := range []struct {
		name  string
		host  simHost
		pages int
		nop   bool
		jit   float64
	}{
		{"L=20 b1", simHost{limit: 20, service: 0.02}, 2000, false, 0.001},
		{"L=5 b1", simHost{limit: 5, service: 0.02}, 500, false, 0.001},
		{"L=2 b1", simHost{limit: 2, service: 0.02}, 200, false, 0.001},
		{"L=20 bare", simHost{limit: 20, service: 0.02}, 2000, true, 0.001},
		{"L=50 b3", simHost{limit: 50, burst: 3, service: 0.05}, 3000, false, 0.001},
		{"L=100 b5", simHost{limit: 100, burst: 5, service: 0.02}, 5000, false, 0.001},
		{"L=20 b1 jitter", simHost{limit: 20, service: 0.02}, 2000, false, 0.005},
	} {
		sim("bucket "+h.name, simConfig{host: h.host, pages: h.pages, noPause: h.nop, jitter: h.jit, duration: 1000, rtt: 0.01, seed: 1})
	}
	for _, nop := range []bool{false, true} {
		sim(fmt.Sprintf("drop nopause=%v", nop), simConfig{host: simHost{limit: 40, service: 0.02, dropAt: 30, dropBy: 0.25}, duration: 70, rtt: 0.01, jitter: 0.001, noPause: nop, seed: 1})
	}
	sim("rise", simConfig{host: simHost{limit: 10, service: 0.02, dropAt: 30, dropBy: 3}, duration: 150, rtt: 0.01, jitter: 0.001, seed: 1})
	for _, w := range []struct {
		workers int
		service float64
	}{{4, 0.1}, {2, 0.2}, {6, 0.05}, {8, 0.03}, {1, 0.05}} {
		sim(fmt.Sprintf("workers %d %g", w.workers, w.service), simConfig{host: simHost{workers: w.workers, service: w.service}, duration: 60, rtt: 0.002, jitter: 0.0005, seed: 1})
	}
	for i, h := range []simHost{{service: 0.1, sigma: 0.5}, {service: 0.1, sigma: 1}, {limit: 20, burst: 5, service: 0.15, sigma: 0.5},
		{limit: 20, burst: 5, service: 0.15, sigma: 0.8}, {workers: 4, service: 0.1, sigma: 0.5}} {
		for seed := int64(1); seed <= 2; seed++ {
			sim(fmt.Sprintf("spread %d seed %d", i, seed), simConfig{host: h, duration: 60, rtt: 0.02, jitter: 0.002, seed: seed})
		}
	}
	sim("unlimited", simConfig{host: simHost{service: 0.02}, duration: 10, rtt: 0.002, jitter: 0.0005, seed: 1})
	for i, s := range []struct {
		host  simHost
		pages int
		nop   bool
	}{{simHost{limit: 10, burst: 2}, 150, false}, {simHost{limit: 10, burst: 3}, 150, false}, {simHost{limit: 8, burst: 1}, 100, true},
		{simHost{limit: 50, burst: 5}, 1000, false}, {simHost{limit: 20, burst: 2, dropAt: 5, dropBy: 0.25}, 200, false}} {
		s.host.service = 0.001
		sim(fmt.Sprintf("short %d", i), simConfig{host: s.host, pages: s.pages, noPause: s.nop, duration: 300, rtt: 0.001, jitter: 0.0005, seed: 1})
	}
	for _, f := range []struct {
		window float64
		quota  int
	}{{2, 20}, {1, 10}, {1, 5}, {10, 100}} {
		sim(fmt.Sprintf("fixed %d per %g", f.quota, f.window), simConfig{host: simHost{window: f.window, quota: f.quota, service: 0.02}, pages: 2000, duration: 2000, rtt: 0.01, jitter: 0.001, seed: 1})
	}
	for _, w := range []struct {
		period, retry float64
		quota         int
		service       float64
	}{{1, 0, 10, 0.02}, {1, 1, 20, 0.02}, {10, 0, 100, 0.02}, {10, 0, 100, 0.001}, {60, 0, 300, 0.02}} {
		for seed := int64(1); seed <= 2; seed++ {
			sim(fmt.Sprintf("sliding %d per %g retry %g service %g seed %d", w.quota, w.period, w.retry, w.service, seed),
				simConfig{host: simHost{sliding: w.period, slidingRetry: w.retry, quota: w.quota, service: w.service}, pages: 2000, duration: 20000, rtt: 0.01, jitter: 0.001, seed: seed})
		}
	}
	for seed := int64(1); seed <= 2; seed++ {
		sim(fmt.Sprintf("ban seed %d", seed), simConfig{host: simHost{banCount: 50, banFor: 5, service: 0.001}, pages: 3000, duration: 3000, rtt: 0.001, jitter: 0.0005, seed: seed})
	}
	for _, p := range []float64{10, 30, 60} {
		sim(fmt.Sprintf("retry-after %g", p), simConfig{host: simHost{limit: 10, burst: 2, service: 0.02, retryFixed: p}, pages: 3000, duration: 5000, rtt: 0.01, jitter: 0.001, seed: 1})
	}
	for _, h := range []struct {
		limit, burst float64
		pages        int
		rtt          float64
	}{{10, 20, 3000, 0.01}, {10, 50, 3000, 0.01}, {10, 100, 3000, 0.01}, {5, 30, 3000, 0.01}, {50, 100, 3000, 0.01}, {1, 40, 300, 0.1}} {
		sim(fmt.Sprintf("big burst L=%g b=%g", h.limit, h.burst), simConfig{host: simHost{limit: h.limit, burst: h.burst, service: 0.02}, pages: h.pages, duration: 5000, rtt: h.rtt, jitter: 0.002, noPause: true, seed: 1})
	}
	for _, late := range []float64{0, 0.005, 0.010} {
		sim(fmt.Sprintf("late timer %g", late), simConfig{host: simHost{limit: 50, burst: 5, service: 0.001}, pages: 1000, duration: 300, rtt: 0.001, jitter: 0.0005, seed: 1, late: late})
	}
	// Stated limits: true, too high (refuted), and demand labels.
	sim("stated true", simConfig{host: simHost{limit: 20, burst: 2, service: 0.02}, stated: 20, pages: 1000, duration: 300, rtt: 0.01, jitter: 0.001, seed: 1})
	sim("stated high", simConfig{host: simHost{limit: 20, burst: 2, service: 0.02}, stated: 60, pages: 1000, duration: 300, rtt: 0.01, jitter: 0.001, seed: 1})
	sim("demand spare", simConfig{host: simHost{limit: 20, burst: 2, service: 0.02}, demand: DemandSpare, pages: 500, duration: 300, rtt: 0.01, jitter: 0.001, seed: 1})
	sim("demand held", simConfig{host: simHost{limit: 20, burst: 2, service: 0.02}, demand: DemandHeld, pages: 1000, duration: 300, rtt: 0.01, jitter: 0.001, seed: 1})
	sim("config", simConfig{host: simHost{limit: 30, burst: 4, service: 0.02}, cfg: Config{InitialRate: 0.5, MinRate: 0.2, MaxRate: 60, InitialWindow: 1, MaxWindow: 3}, pages: 1000, duration: 300, rtt: 0.01, jitter: 0.001, seed: 1})
	// Restored and hinted starts: a saved probe, a saved slow start, a hint.
	for i, st := range []State{
		{Version: 3, Rate: 30, Window: 4, Plateau: 25, Baseline: 15 * time.Millisecond, Decreases: 3, OverLimit: 2, RefusalPause: time.Second, FailureShare: 0.05, FailureSamples: 60, FailCut: 40},
		{Version: 2, Rate: 8, Window: 2, Plateau: 9, Decreases: 1},
		{Rate: 5, Window: 3, SlowStart: true},
		{Rate: 40, Window: 6}, // as Hint gives it
	} {
		sim(fmt.Sprintf("restore %d", i), simConfig{host: simHost{limit: 20, burst: 3, service: 0.02}, restore: &st, pages: 1000, duration: 300, rtt: 0.01, jitter: 0.001, seed: 1})
	}
	// Hosts failing at random (a background share) or beyond a load.
	drive := func(name string, cfg Config, seed int64, dur time.Duration, sig Signal, fail func(float64) float64) {
		sc["driver/"+name] = func(tr *trail) *Controller {
			c := New(cfg, t0)
			d := &driver{c: c, now: t0, lat: 20 * time.Millisecond, trail: tr}
			badHost(c, d, rand.New(rand.NewSource(seed)), dur, sig, fail)
			return c
		}
	}
	for seed := int64(1); seed <= 3; seed++ {
		for _, p := range []float64{0.1, 0.2} {
			drive(fmt.Sprintf("failing %g seed %d", p, seed), Config{MaxRate: 50}, seed, 90*time.Second, Failure, func(float64) float64 { return p })
		}
		drive(fmt.Sprintf("load failures seed %d", seed), Config{MaxRate: 200}, seed, 90*time.Second, Failure, func(r float64) float64 { return max(0, 1-20/r) })
		drive(fmt.Sprintf("load refusals seed %d", seed), Config{MaxRate: 200}, seed, 60*time.Second, Overload, func(r float64) float64 { return max(0, 1-20/r) })
		drive(fmt.Sprintf("random refusals seed %d", seed), Config{MaxRate: 50}, seed, 60*time.Second, Overload, func(float64) float64 { return 0.05 })
	}
	// A host spent by someone else refuses from the first page: the run's end restarts slow
	// start; then refusals resumed soon after a run.
	sc["driver/spent host"] = func(tr *trail) *Controller {
		c := New(Config{}, t0)
		d := &driver{c: c, now: t0, lat: 2 * time.Millisecond, trail: tr}
		d.send(Success)
		d.drain()
		for end := d.now.Add(20 * time.Second); d.now.Before(end); {
			d.refuse(Overload)
		}
		d.run(10 * time.Second)
		for i := 0; i < 3; i++ {
			for end := d.now.Add(3 * time.Second); d.now.Before(end); {
				d.refuse(Overload)
			}
			d.run(time.Duration(i+1) * time.Second)
			d.refuse(Failure)
			d.refuse(Overload)
			d.run(5 * time.Second)
		}
		return c
	}
	sc["hint"] = func(tr *trail) *Controller {
		c := Hint(Config{}, 30, 3, t0)
		d := &driver{c: c, now: t0, lat: 10 * time.Millisecond, trail: tr}
		d.run(20 * time.Second)
		return c
	}
	for ci, cfg := range []Config{{}, {MinRate: 0.5, MaxRate: 50, MaxWindow: 4}, {InitialRate: 1000, MaxWindow: 32}} {
		sc[fmt.Sprintf("random/%d", ci)] = func(tr *trail) *Controller { return randomStream(cfg, int64(ci+1), tr) }
	}
	return sc
}

// randomStream feeds c 6,000 random outcomes (every field drawn, out-of-order times, ceilings
// set and removed, the controller restored from its State now and then) and returns it.
func randomStream(cfg Config, seed int64, tr *trail) *Controller {
	rnd := rand.New(rand.NewSource(seed))
	c := New(cfg, t0)
	now := t0
	for i := 0; i < 6000; i++ {
		now = now.Add(time.Duration(rnd.Int63n(int64(50 * time.Millisecond))))
		if rnd.Intn(50) == 0 {
			now = now.Add(-time.Second)
		}
		lat := time.Duration(rnd.Int63n(int64(300 * time.Millisecond)))
		o := Outcome{Signal: Signal(rnd.Intn(5)), Sent: now.Add(-lat), Latency: lat, InFlight: rnd.Intn(6), Demand: Demand(rnd.Intn(3))}
		if rnd.Intn(3) > 0 {
			o.Signal = Success
		}
		switch rnd.Intn(20) {
		case 0:
			o.Sent = time.Time{}
		case 1:
			o.Latency = 0
		case 2:
			o.Sent = now.Add(time.Hour)
		case 3:
			o.Pause = time.Duration(rnd.Int63n(int64(5 * time.Second)))
		case 4:
			o.Stated = rnd.Float64() * 40
		}
		c.Observe(now, o)
		tr.note(c)
		switch rnd.Intn(1000) {
		case 0, 1:
			c.SetCeiling(rnd.Float64() * 20)
		case 2:
			c.SetCeiling(0)
		case 3:
			c = Restore(cfg, c.State(), now)
		}
	}
	return c
}

// TestGoldenTrails replays every golden scenario and compares its trail with
// testdata/golden.txt: a change to the package that is meant to keep its behaviour must keep
// every line. `go test ./aimd/ -run TestGoldenTrails -update` rewrites the file. The digests
// hold exact floating-point results, so they are pinned on amd64 only (other architectures may
// fuse multiply-adds).
func TestGoldenTrails(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("golden digests are pinned on amd64")
	}
	scenarios := goldenScenarios()
	got := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for name, run := range scenarios {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			tr := newTrail()
			line := tr.end(run(tr))
			mu.Lock()
			got[name] = line
			mu.Unlock()
		}()
	}
	wg.Wait()
	const path = "testdata/golden.txt"
	if *updateGolden {
		var b strings.Builder
		b.WriteString("# scenario\tsteps digest last-sample (TestGoldenTrails; regenerate with -update)\n")
		for _, name := range sortedKeys(got) {
			fmt.Fprintf(&b, "%s\t%s\n", name, got[name])
		}
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d trails to %s", len(got), path)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, line, ok := strings.Cut(sc.Text(), "\t"); ok && !strings.HasPrefix(name, "#") {
			want[name] = line
		}
	}
	if len(want) != len(got) {
		t.Errorf("%s holds %d trails, the scenarios are %d", path, len(want), len(got))
	}
	changed := 0
	for _, name := range sortedKeys(got) {
		if want[name] != got[name] {
			changed++
			t.Errorf("%s:\n  got  %s\n  want %s", name, got[name], want[name])
		}
	}
	if changed > 0 {
		t.Logf("%d of %d trails changed", changed, len(got))
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
