package retry

import (
	"math/rand"
	"time"
)

// Defaults for the zero fields of Policy.
const (
	DefaultBase        = 500 * time.Millisecond
	DefaultCap         = 60 * time.Second
	DefaultMaxAttempts = 5
)

// Policy is capped exponential backoff with full jitter, plain data. A zero field takes its
// default: Base 500ms, Cap 60s, MaxAttempts 5. Policy is a value; its methods do not change it.
type Policy struct {
	Base        time.Duration // backoff ceiling of the first retry (attempt 0)
	Cap         time.Duration // no backoff ceiling grows beyond this
	MaxAttempts int           // attempts in all, the first one included; the caller enforces it
}

func (p Policy) withDefaults() Policy {
	if p.Base <= 0 {
		p.Base = DefaultBase
	}
	if p.Cap <= 0 {
		p.Cap = DefaultCap
	}
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	return p
}

// Ceiling returns min(Cap, Base·2^attempt), the upper bound of Backoff(attempt). A negative
// attempt counts as 0.
func (p Policy) Ceiling(attempt int) time.Duration {
	p = p.withDefaults()
	attempt = max(attempt, 0)
	// Base·2^attempt ≥ Cap once 2^attempt ≥ Cap/Base: stop doubling there (no overflow).
	d := p.Base
	for i := 0; i < attempt && d < p.Cap; i++ {
		if d > p.Cap/2 {
			return p.Cap
		}
		d *= 2
	}
	return min(d, p.Cap)
}

// Backoff returns the wait before retry number attempt (0 for the first retry): full jitter,
// uniformly random in [0, min(Cap, Base·2^attempt)), the cap applied before the jitter so that
// late retries stay spread over the whole capped range. A nil rnd gives the ceiling itself (no
// jitter). rnd is not safe for concurrent use; the caller serializes it.
func (p Policy) Backoff(attempt int, rnd *rand.Rand) time.Duration {
	c := p.Ceiling(attempt)
	if rnd == nil {
		return c
	}
	return time.Duration(rnd.Int63n(int64(c)))
}

// Delay returns the wait before retry number attempt when the host asked for retryAfter
// (0 if it did not): max(retryAfter, Backoff(attempt)). A huge retryAfter is kept: capping it
// (or deferring the URL instead) is the caller's call.
func (p Policy) Delay(attempt int, retryAfter time.Duration, rnd *rand.Rand) time.Duration {
	return max(retryAfter, p.Backoff(attempt, rnd))
}
