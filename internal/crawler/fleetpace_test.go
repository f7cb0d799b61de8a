package crawler

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/fleet"
	"github.com/crawl-project/crawl/internal/simweb"
)

// pacedFake is a shared crawl whose fleet pace (fleetPacer) answers from a script of replies
// (the last one repeated) and records what it was asked and told.
type pacedFake struct {
	*sharedFake

	mu      sync.Mutex
	replies []fleet.PaceSlot
	err     error
	asked   []paceAsk
	holds   []paceHold
}

type paceAsk struct {
	gate               string
	interval, lateness time.Duration
}

type paceHold struct {
	gate            string
	interval, pause time.Duration
	refused         bool
}

func (p *pacedFake) Pace(ctx context.Context, gate string, interval, lateness time.Duration) (fleet.PaceSlot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, paceAsk{gate, interval, lateness})
	if p.err != nil {
		return fleet.PaceSlot{}, p.err
	}
	r := p.replies[0]
	if len(p.replies) > 1 {
		p.replies = p.replies[1:]
	}
	return r, nil
}

func (p *pacedFake) PaceHold(gate string, interval, pause time.Duration, refused bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holds = append(p.holds, paceHold{gate, interval, pause, refused})
	return nil
}

var _ fleetPacer = (*pacedFake)(nil)

// fleetSlot asks the fleet's pace again after a pause, and after waking later than its slot
// allowed for (noting that lateness for the next ask); it returns no slot, and no error, when
// the pace cannot be asked, and ctx's error once ctx has ended.
func TestFleetSlot(t *testing.T) {
	pf := &pacedFake{sharedFake: newSharedFake(t)}
	c := openSharedSeeded(t, pf, "http://site.example/")
	ctx := context.Background()
	const gate = "api.example"
	pf.replies = []fleet.PaceSlot{
		{State: fleet.PacePaused},
		{State: fleet.PaceReserved, Wait: time.Millisecond},                  // woken later than Late 0 allows
		{State: fleet.PaceReserved, Wait: time.Millisecond, Late: time.Hour}, // taken
	}
	before := time.Now()
	slot, err := c.fleetSlot(ctx, gate)
	if err != nil || slot.Before(before.Add(time.Millisecond)) {
		t.Fatalf("fleetSlot: %v, %v; want a slot at least 1 ms after %v", slot, err, before)
	}
	if len(pf.asked) != 3 {
		t.Fatalf("asked %d times, want 3: %+v", len(pf.asked), pf.asked)
	}
	for _, a := range pf.asked {
		if a.gate != gate || a.lateness < lateFloor {
			t.Errorf("asked %+v, want gate %q and a lateness of at least %v", a, gate, lateFloor)
		}
	}
	if n := c.renders.subs.late.n; n != 1 {
		t.Errorf("%d lateness noted, want 1: the missed slot's", n)
	}

	pf.err = errors.New("redis unreachable")
	if slot, err := c.fleetSlot(ctx, gate); !slot.IsZero() || err != nil {
		t.Errorf("pace unreachable: %v, %v; want no slot and no error (paced by the worker's gate)", slot, err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.fleetSlot(done, gate); !errors.Is(err, context.Canceled) {
		t.Errorf("ctx ended: %v, want context.Canceled", err)
	}
}

// A crawl of one's own has no fleet pace: no slot, at once.
func TestFleetSlotAlone(t *testing.T) {
	c := openForSubresources(t, Config{Dir: t.TempDir(), Seeds: []string{"http://site.example/"}})
	if slot, err := c.fleetSlot(context.Background(), "api.example"); !slot.IsZero() || err != nil {
		t.Errorf("fleetSlot alone: %v, %v", slot, err)
	}
}

// sendLateness keeps the greatest of the last lateKept sends' lateness, never less than
// lateFloor, and never counts an early send as negative.
func TestSendLateness(t *testing.T) {
	var l sendLateness
	t0 := time.Unix(1_000_000, 0)
	if got := l.most(); got != lateFloor {
		t.Errorf("before any send: %v, want %v", got, lateFloor)
	}
	l.note(t0, t0.Add(-time.Second))
	if got := l.most(); got != lateFloor {
		t.Errorf("after an early send: %v, want %v", got, lateFloor)
	}
	l.note(t0, t0.Add(40*time.Millisecond))
	if got := l.most(); got != 40*time.Millisecond {
		t.Errorf("after a send 40 ms late: %v", got)
	}
	for i := range lateKept - 1 {
		l.note(t0, t0.Add(time.Duration(i%7)*time.Millisecond))
	}
	if got := l.most(); got != 40*time.Millisecond {
		t.Errorf("40 ms among the last %d: %v", lateKept, got)
	}
	l.note(t0, t0.Add(time.Millisecond)) // pushes the 40 ms out
	if got := l.most(); got != 6*time.Millisecond {
		t.Errorf("once the 40 ms send is older than the last %d: %v, want 6 ms", lateKept, got)
	}
}

// In a shared crawl every sub-request is sent at a fleet's slot, and each 429 tells the
// fleet's pace: a refusal, with its Retry-After as the pause, and the gate's interval after it.
func TestSubresourceTellsTheFleet(t *testing.T) {
	t.Parallel()
	const pages = 12
	a := startAppWeb(t, simweb.AppOptions{Pages: pages, APILimit: 4})
	pf := &pacedFake{sharedFake: newSharedFake(t), replies: []fleet.PaceSlot{{State: fleet.PaceReserved, Late: time.Hour}}}
	cfg := a.config(t)
	cfg.InitialRate = 20 // far above the limit: 429s come at once
	c, err := OpenWith(cfg, pf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.initSubresources(); err != nil {
		t.Fatal(err)
	}
	askContents(t, a, c, cfg.Seeds[0], pages)
	s := a.web.Stats()[simweb.AppAPI]
	gate := simweb.AppAPI + ":" + a.port
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if n := len(pf.asked); n < s.Requests { // more: asked again after a pause (localDue)
		t.Errorf("the fleet's pace was asked %d times for %d requests (robots.txt included)", n, s.Requests)
	}
	refused := 0
	for _, h := range pf.holds {
		if h.gate != gate || h.interval <= 0 {
			t.Errorf("hold %+v, want gate %q and the gate's interval", h, gate)
		}
		if h.refused {
			refused++
			if h.pause < time.Second {
				t.Errorf("refusal told with pause %v, want its Retry-After (whole seconds)", h.pause)
			}
		}
	}
	if s.OverLimit == 0 || refused != s.OverLimit {
		t.Errorf("%d refusals told to the fleet, %d met; want every one (and some)", refused, s.OverLimit)
	}
}

// gateWrites keeps each gate's latest write, and forgets, once it keeps gateWritesKept gates,
// those not written to for a minute.
func TestGateWrites(t *testing.T) {
	var w gateWrites
	t0 := time.Unix(1_000_000, 0)
	if got := w.last("a"); !got.IsZero() {
		t.Errorf("before any write: %v", got)
	}
	w.note("a", t0.Add(time.Second))
	w.note("a", t0) // an earlier write noted later changes nothing
	if got := w.last("a"); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("last write to a: %v, want %v", got, t0.Add(time.Second))
	}
	for i := range gateWritesKept {
		w.note("g"+strconv.Itoa(i), t0)
	}
	w.note("b", t0.Add(2*time.Minute))
	if n := len(w.at); n != 1 || w.last("b").IsZero() {
		t.Errorf("after a write 2 min later: %d gates kept (%v), want b alone", n, w.at)
	}
}
