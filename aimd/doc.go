// Package aimd learns how fast one host may be crawled. Its one job: outcomes of finished
// requests (with their times) in, an allowed request rate and a concurrency window out. The
// crawler is never told a host's limit; it must finish as if it knew it, with almost no
// over-limit replies.
//
// There are only a few types: Controller (one per host), Config (policy, plain data), Outcome
// (what one request taught us), Phase (where the rate is on its way), Stats and State (what it
// has learned, to show and to persist).
//
// A Controller is pure: no goroutines, no clock, no I/O. Every method that decides takes the
// time as an argument, so tests drive it with a fake clock. It is not safe for concurrent use;
// hostlimit holds one lock per host around it.
//
// # What goes in
//
// Observe(now, Outcome) once per finished request: its Signal (Success; Overload, an explicit
// "slow down" such as 429 or 503; Failure, an implicit one such as a timeout or a 502;
// Neutral, which moves nothing), when it was sent, its latency, the host's requests in flight
// when it was sent, and the pause its answer imposed (Retry-After). SetCeiling caps the rate
// (robots.txt Crawl-delay).
//
// # What comes out
//
// Rate() in req/s, within [MinRate, MaxRate] and under the ceiling; Window() in requests,
// within [1, MaxWindow]; Burst(), how many requests may leave back to back (1 unless
// the bucket fit holds the rate). Stats() is a snapshot for displays, with the Phase:
// slow-start, refusal-run, return, hold, search or probe. State() is the serialisable form of
// everything the controller has learned, versioned (StateVersion); Restore(cfg, s, now) goes on
// from it, on this worker or another, mid-episode.
//
// # The guarantees
//
//   - At most one decrease per congestion epoch: a signal about a request sent before the last
//     decrease belongs to the epoch that decrease answered.
//   - The rate never rises on a refusal, and grows only while it is the binding limit (sends
//     spaced as fast as it allows, with a window slot free).
//   - A Failure moves the rate only in a cluster, and not while sent at under half the success
//     rate the host answered within the last 10 s; a bare refusal (no Retry-After) only beyond
//     the host's learned background share of them.
//   - The window shrinks only on a latency signal that our own concurrency explains, or on
//     Failures with the window full.
//   - Outcomes with out-of-order times are clamped; invalid Config and State fields are
//     replaced by defaults; no input makes the rate NaN or leave its bounds.
//
// # How it decides
//
// Observe runs each outcome through one front filter (Controller.remember), which labels it:
// served, a signal of the host's limit, the host's own failure, or noise (a stated limit is
// taken before it). Estimators (the bucket fit, the run measure, the failure logs' background
// shares, the served rate, the latency reference) turn outcomes into bounds and proposals.
// The state machine moves on them: the phase is stored (Controller.phase), and the functions
// of fsm.go are the only code that writes the rate, the window and the phase (begin, resume
// and recap at start and restore; slowStartGrow, startSlowStart, probeRestart, searchStep,
// climbTo and growWindow on growth; cutRate, shrinkWindow, undoShrink and endRun on a decrease;
// holdFitted, holdStated and undoCuts on an estimator's bound). Every tunable is a Config field (config.go) or a constant of
// tunables.go, one line each. The rules, the server behaviour each answers and the tests that
// pin them are in docs/aimd.md; measured figures are in BENCHMARKS.md.
//
// Written by hand: no Go library learns a server's rate limit from outcomes. TCP's congestion
// control (RFC 5681, CUBIC's RFC 9438) is the model for the epochs, slow start and the probe.
package aimd
