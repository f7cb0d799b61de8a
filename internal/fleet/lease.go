package fleet

import (
	"strconv"
	"time"
)

// LeaseState is what a worker may do with a partition it owned at some time, judged on its own
// monotonic clock.
type LeaseState int

const (
	// Held: fetch and write; no renewal needed yet.
	Held LeaseState = iota + 1
	// RenewDue: a third of the TTL has passed since the worker's lease was last renewed; go
	// on fetching and send the heartbeat now.
	RenewDue
	// Lapsed: the worker's lease may end in Redis soon or may have ended; start no request,
	// cancel those in flight, and acquire the partition again before using it.
	Lapsed
)

func (s LeaseState) String() string {
	switch s {
	case Held:
		return "held"
	case RenewDue:
		return "renew-due"
	case Lapsed:
		return "lapsed"
	}
	return "LeaseState(" + strconv.Itoa(int(s)) + ")"
}

// Ownership is a worker's claim on one partition: the fencing epoch the acquire drew and the
// local time at which the heartbeat that last renewed the worker's lease was sent (the lease
// is the worker's, not the partition's: Keeper). The lease in Redis runs from the heartbeat's
// arrival, so it ends no earlier than sent+TTL on any clock that runs no faster than Redis';
// no other worker takes the partition before it ends, and the worker stops at sent+TTL-margin.
type Ownership struct {
	Partition int
	Epoch     int64
	token     string        // "EPOCH:WORKER", the owner key's value, checked by every write
	sent      time.Time     // local time the worker's last successful heartbeat was sent
	ttl       time.Duration // the worker's lease TTL
}

// safetyDiv sets the part of the TTL a worker gives up: it stops using a lease at
// sent + ttl - ttl/safetyDiv, which leaves room for a clock-rate difference between the worker
// and Redis and for cancelling requests in flight.
const safetyDiv = 5

// StopAt is the local time after which the worker must not use the ownership (start or keep
// requests to its hosts) unless a later heartbeat has succeeded.
func (o Ownership) StopAt() time.Time { return o.sent.Add(o.ttl - o.ttl/safetyDiv) }

// RenewAt is the local time at which the worker's lease should be renewed: a third of the
// TTL after the last successful heartbeat was sent.
func (o Ownership) RenewAt() time.Time { return o.sent.Add(o.ttl / 3) }

// StateAt says what the worker may do with o at local time now.
func (o Ownership) StateAt(now time.Time) LeaseState {
	switch {
	case !now.Before(o.StopAt()):
		return Lapsed
	case !now.Before(o.RenewAt()):
		return RenewDue
	}
	return Held
}
