package aimd

import (
	"encoding/json"
	"math"
	"time"
)

// StateVersion is the version of State that Controller.State writes. Version 1 (and 0, before
// versions) kept the rate, window, plateau, baseline, refusal cost and background shares; a
// controller restored from it holds under the plateau and probes. Version 2 adds Parts: the
// curve, target, refusal episode, bucket fit, epoch and failure logs, so that a host saved on
// one worker and restored on another goes on mid-episode.
const StateVersion = 2

// parts is the serialisable form of a controller's parts (State.Parts). Instants are stored as
// how long before the controller's latest time they were (an ago), so that a controller
// restored at another time goes on as if no time had passed in between; an unset instant is
// nil. Samples, rate history and the latency reference are not kept: they are measurements
// the host renews within seconds.
type parts struct {
	Curve   curveJSON   `json:"curve"`
	Pace    paceJSON    `json:"pace"`
	Target  targetJSON  `json:"target"`
	Episode episodeJSON `json:"episode"`
	Fit     fitJSON     `json:"fit"`
	Epoch   epochJSON   `json:"epoch"`
	Fails   logJSON     `json:"fails"`
	Overs   logJSON     `json:"overs"`
	Window  windowJSON  `json:"window"`
}

type curveJSON struct {
	From     float64       `json:"from"`
	Elapsed  time.Duration `json:"elapsed,omitempty"`
	Hold     time.Duration `json:"hold,omitempty"`
	Steps    int           `json:"steps,omitempty"`
	Searched bool          `json:"searched,omitempty"`
}

type paceJSON struct {
	ProbeTime   time.Duration `json:"probe_time"`
	LastRefusal *float64      `json:"last_refusal,omitempty"`
}

type targetJSON struct {
	Rate float64    `json:"rate,omitempty"`
	Kind targetKind `json:"kind,omitempty"`
}

type episodeJSON struct {
	Run          int      `json:"run,omitempty"`
	Resumed      bool     `json:"resumed,omitempty"`
	From         *int64   `json:"from,omitempty"`
	Rate         float64  `json:"rate,omitempty"`
	Refused      float64  `json:"refused,omitempty"`
	Start        *int64   `json:"start,omitempty"`
	Last         *int64   `json:"last,omitempty"`
	Settled      bool     `json:"settled,omitempty"`
	LeastResumed *float64 `json:"least_resumed,omitempty"`
	FirstEnd     *int64   `json:"first_end,omitempty"`
	LastEnd      *int64   `json:"last_end,omitempty"`
	BlockLen     int64    `json:"block_len,omitempty"`
}

type fitJSON struct {
	Start  *int64     `json:"start,omitempty"`
	From   *int64     `json:"from,omitempty"`
	To     *int64     `json:"to,omitempty"`
	At     *int64     `json:"at,omitempty"`
	State  fitState   `json:"state,omitempty"`
	Held   *float64   `json:"held,omitempty"`
	Size   float64    `json:"size,omitempty"`
	Misses int        `json:"misses,omitempty"`
	Log    [][2]int64 `json:"log,omitempty"` // [ago, signal] per request, oldest first
}

type epochJSON struct {
	Start *int64 `json:"start,omitempty"`
	OK    int    `json:"ok,omitempty"`
}

type logJSON struct {
	Bits  uint16  `json:"bits,omitempty"`
	Held  uint16  `json:"held,omitempty"`
	N     int     `json:"n,omitempty"`
	Fresh int     `json:"fresh,omitempty"`
	UndoR float64 `json:"undo_rate,omitempty"`
	UndoP float64 `json:"undo_plateau,omitempty"`
	UndoS bool    `json:"undo_slow,omitempty"`
	UndoN int     `json:"undo_n,omitempty"`
}

type windowJSON struct {
	Mode     windowMode `json:"mode,omitempty"`
	Patience int        `json:"patience,omitempty"`
	LastSet  int        `json:"last_set,omitempty"`
}

// clock converts instants to and from agos relative to ref.
type clock struct{ ref nanos }

func (k clock) ago(t nanos) *int64 {
	if t == never {
		return nil
	}
	a := int64(k.ref - t)
	return &a
}

func (k clock) agoOpt(t optional[nanos]) *int64 {
	if v, ok := t.get(); ok {
		return k.ago(v)
	}
	return nil
}

func (k clock) at(a *int64) nanos {
	if a == nil {
		return never
	}
	return k.ref - nanos(*a)
}

func (k clock) atOpt(a *int64) optional[nanos] {
	var o optional[nanos]
	if a != nil {
		o.set(k.at(a))
	}
	return o
}

func rateOpt(r optional[float64]) *float64 {
	if v, ok := r.get(); ok {
		return &v
	}
	return nil
}

func optRate(p *float64) optional[float64] {
	var o optional[float64]
	if p != nil && validRate(*p) > 0 {
		o.set(*p)
	}
	return o
}

func logOf(f *failureLog) logJSON {
	return logJSON{Bits: f.bits, Held: f.held, N: f.n, Fresh: f.fresh,
		UndoR: f.undo.rate, UndoP: f.undo.plateau, UndoS: f.undo.slow, UndoN: f.undo.n}
}

func (j logJSON) restoreInto(f *failureLog) {
	f.bits, f.held, f.n, f.fresh = j.Bits, j.Held, min(max(j.N, 0), 16), min(max(j.Fresh, 0), 16)
	if validRate(j.UndoR) > 0 {
		f.undo = failureUndo{rate: j.UndoR, plateau: max(j.UndoP, 0), slow: j.UndoS, n: j.UndoN}
	}
}

// parts returns the serialisable form of c's parts.
func (c *Controller) parts() json.RawMessage {
	k := clock{ref: toNanos(c.last)}
	e, f := &c.ep, &c.fit
	p := parts{
		Curve:  curveJSON{From: c.curve.from, Elapsed: c.curve.elapsed, Hold: c.curve.hold, Steps: c.curve.steps, Searched: c.curve.searched},
		Pace:   paceJSON{ProbeTime: c.pace.probeTime, LastRefusal: rateOpt(c.pace.lastRefusal)},
		Target: targetJSON{Rate: c.target.rate, Kind: c.target.kind},
		Episode: episodeJSON{Run: e.run, Resumed: e.resumed, From: k.ago(e.from), Rate: e.rate, Refused: e.refused,
			Start: k.ago(e.start), Last: k.ago(e.last), Settled: e.settled, LeastResumed: rateOpt(e.leastResumed),
			FirstEnd: k.agoOpt(e.firstEnd), LastEnd: k.agoOpt(e.lastEnd), BlockLen: int64(e.blockLen)},
		Fit: fitJSON{Start: k.ago(f.start), From: k.ago(f.from), To: k.ago(f.to), At: k.ago(f.at), State: f.state,
			Held: rateOpt(f.held), Size: f.size, Misses: f.misses},
		Epoch:  epochJSON{Start: k.ago(c.epoch.start), OK: c.epoch.ok},
		Fails:  logOf(&c.fails),
		Overs:  logOf(&c.overs),
		Window: windowJSON{Mode: c.win.mode, Patience: c.win.patience, LastSet: c.win.lastSet},
	}
	if f.state == fitIdle {
		p.Fit.To, p.Fit.At = nil, nil
	}
	for _, r := range f.recs {
		p.Fit.Log = append(p.Fit.Log, [2]int64{*k.ago(r.sent), int64(r.sig)})
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil // plain data: cannot happen
	}
	return b
}

// restoreParts sets c's parts from raw (State.Parts), with instants placed relative to c.last.
// It reports false, changing nothing, if raw does not decode.
func (c *Controller) restoreParts(raw json.RawMessage) bool {
	var p parts
	if err := json.Unmarshal(raw, &p); err != nil {
		return false
	}
	k := clock{ref: toNanos(c.last)}
	c.curve.from = validRate(p.Curve.From)
	if c.curve.from == 0 {
		c.curve.from = c.rate
	}
	c.curve.elapsed, c.curve.hold = max(p.Curve.Elapsed, 0), max(p.Curve.Hold, 0)
	c.curve.steps, c.curve.searched = max(p.Curve.Steps, 0), p.Curve.Searched
	c.pace.probeTime = min(max(p.Pace.ProbeTime, probeTime), maxPatience*probeTime)
	c.pace.lastRefusal = optRate(p.Pace.LastRefusal)
	if p.Target.Kind <= targetSlowStart { // a kind this build does not know: no target
		c.target.set(validRate(p.Target.Rate), p.Target.Kind)
	}
	j := p.Episode
	c.ep = episode{run: max(j.Run, 0), resumed: j.Resumed, from: k.at(j.From), rate: max(j.Rate, 0), refused: max(j.Refused, 0),
		start: k.at(j.Start), last: k.at(j.Last), settled: j.Settled, leastResumed: optRate(j.LeastResumed),
		firstEnd: k.atOpt(j.FirstEnd), lastEnd: k.atOpt(j.LastEnd), blockLen: nanos(max(j.BlockLen, 0))}
	fj := p.Fit
	c.fit = fitter{start: k.at(fj.Start), from: k.at(fj.From), held: optRate(fj.Held), misses: max(fj.Misses, 0)}
	if _, ok := c.fit.held.get(); ok && fj.Size >= 1 && fj.Size <= burstGrid[len(burstGrid)-1] {
		c.fit.size = math.Floor(fj.Size)
	}
	if fj.State != fitIdle && fj.State <= fitSet && fj.To != nil && fj.At != nil {
		c.fit.state, c.fit.to, c.fit.at = fj.State, k.at(fj.To), k.at(fj.At)
	}
	for _, r := range fj.Log[max(len(fj.Log)-fitLogCap, 0):] {
		if sig := Signal(r[1]); sig >= Success && sig <= Failure {
			c.fit.recs = append(c.fit.recs, fitRec{sent: k.ref - nanos(r[0]), sig: sig})
		}
	}
	c.epoch = epoch{start: k.at(p.Epoch.Start), ok: max(p.Epoch.OK, 0)}
	if c.epoch.start != never {
		c.epoch.at = time.Unix(0, int64(c.epoch.start))
	}
	p.Fails.restoreInto(&c.fails)
	p.Overs.restoreInto(&c.overs)
	if p.Window.Mode <= windowLatencyBound {
		c.win.mode = p.Window.Mode
	}
	c.win.patience, c.win.lastSet = min(max(p.Window.Patience, 0), maxWindowPatience), max(p.Window.LastSet, 0)
	return true
}
