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
	// Neutral says nothing about load (a DNS error, one broken page's 500, a request we
	// cancelled): it is counted and moves nothing.
	Neutral
)

// Demand says whether the host's rate held a request back when it was sent. The rate grows only
// while it does (R2).
type Demand uint8

const (
	// DemandUnknown: not told; the rate counts as binding when sends were spaced as fast as it allowed.
	DemandUnknown Demand = iota
	// DemandHeld: the request was ready, a worker free, and it waited for the host's rate.
	DemandHeld
	// DemandSpare: the request went as soon as it was ready: the rate limited nothing.
	DemandSpare
)

// Outcome is what the controller learns from one request.
type Outcome struct {
	Signal  Signal
	Sent    time.Time     // when it was sent (zero: now − Latency)
	Latency time.Duration // to response headers (0: no response)
	// InFlight is the host's requests in flight when it was sent, itself included; 0: unknown,
	// estimated from the requests the controller remembers.
	InFlight int
	// Pause is how long the answer paused the host (Retry-After, a spent quota until its
	// reset); 0: none. A refusal with none is a bare refusal.
	Pause  time.Duration
	Demand Demand
	// Stated is the rate the answer's rate-limit headers state, req/s; 0: none (R10).
	Stated float64
}
