// Package aimd learns how fast one host may be crawled: outcomes of finished requests (with
// their times) in, an allowed request rate and a concurrency window out. The crawler is never
// told a host's limit; it must finish as if it knew it, with almost no over-limit replies.
//
// The types: Controller (one per host), Config (policy, plain data), Outcome (what one request
// taught), Signal and Demand (its parts), Phase (where the rate is on its way), Stats and State
// (what it has learned, to show and to persist; Restore and Hint start from them). A Controller
// is pure (no goroutines, clock or I/O; every method that decides takes the time) and not safe
// for concurrent use: hostlimit holds one lock per host around it.
//
// At most one decrease per congestion epoch; the rate never rises on a refusal and grows only
// while it binds; a Failure moves it only in a cluster beyond the host's background share;
// out-of-order times are clamped, invalid Config and State fields replaced by defaults, and no
// input makes the rate NaN or leave its bounds.
//
// How it decides: Observe passes each outcome through one front filter (Controller.remember)
// that labels it a success, a signal of the host's limit, the host's own failure or noise. The
// estimators (the run measure, the failure log's background share, the served peak, the
// accepted and sending rates, the latency reference) only estimate. The phase is stored
// (Controller.phase), and the transitions in fsm.go are the only code that writes the rate, the
// window and the phase (begin, resume, recap; grow, climb, growWindow; decreaseRate,
// shrinkWindow, endRun; holdStated, undoCuts; settle, place);
// TestOnlyTransitionsWriteRateWindowPhase checks it. Every tunable is in config.go, one line
// each; the rules and the tests that pin them are in docs/aimd.md.
package aimd
