package aimd

import "time"

// Signal classifies one finished request for the controller.
type Signal int

const (
	// Success is a response the host served normally (2xx, 3xx, and 4xx other than 408/425/429).
	Success Signal = iota
	// Overload is an explicit "slow down": 429, 503 and their kin (420, 509, 529).
	Overload
	// Failure is an implicit congestion sign: timeout, connection reset/refused, 502, 504, 408, 425.
	Failure
	// Neutral says nothing about load (e.g. a DNS error, a 500 from one broken page, a request
	// cancelled by us); it is counted but moves nothing.
	Neutral
)

// Demand says whether the host's rate held a request back: whether the rate was what limited
// sending to the host when the request was sent. The rate grows only while it is.
type Demand uint8

const (
	// DemandUnknown: not told; the rate counts as binding when sends were spaced as fast as
	// it allowed.
	DemandUnknown Demand = iota
	// DemandHeld: the request was ready, with a worker free for it, and waited for the host's
	// rate: the rate limited sending.
	DemandHeld
	// DemandSpare: the request went as soon as it was ready (or waited only for a worker):
	// the host could have been sent more, so its rate limited nothing and must not grow.
	DemandSpare
)

// label is the front filter's verdict on one outcome that is not Neutral (Neutral is noise
// and stops at the counters; a stated limit is taken before the label, see applyStated).
type label uint8

const (
	labelServed      label = iota // a Success: growth, the latency signal
	labelLimit                    // a signal of the host's limit: a refusal or a Failure cluster, after the last decrease
	labelHostFailure              // the host's own failure: a Failure or bare refusal its background share explains, or a Failure far under what it has just served (R9)
	labelNoise                    // a signal about a request sent before the last decrease: that decrease answered it (R1)
)

// Outcome is what the controller learns from one request.
type Outcome struct {
	Signal  Signal
	Sent    time.Time     // when the request was sent: congestion signals for requests sent before the last decrease belong to that epoch and are not counted again
	Latency time.Duration // time to response headers (0 when there was no response)
	// InFlight is the number of this host's requests in flight when it was sent, itself
	// included (hostlimit knows it exactly); 0 = unknown, estimated from the requests the
	// controller remembers, which misses those still in flight when this one finished.
	InFlight int
	// Pause is how long the response paused the whole host (Retry-After, or a spent rate-limit
	// quota until its reset); 0: none. It is what a refusal costs: a host whose refusals pause
	// it is probed more slowly than one whose refusals cost only a retry.
	Pause time.Duration
	// Demand is whether the host's rate held the request back (see Demand).
	Demand Demand
	// Stated is the rate the answer's rate-limit headers state, req/s (a policy's quota over
	// its window); 0: none. A new statement sets the rate just under it at once and caps it
	// there, until refusals under it refute it (docs/aimd.md, R11).
	Stated float64
}
