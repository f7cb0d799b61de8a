package retry

import "time"

// IdleUnreachable is how long after a host first failed to answer a crawl that has nothing
// else to do keeps checking it again. A busy crawl checks on with its own backoff (the host
// holds nobody up); an idle one would only be held open by it.
const IdleUnreachable = 20 * time.Second

// GiveUpIdle reports whether a crawl whose only remaining work is an unreachable host should
// stop waiting for it at now: the host has failed since since, and its next check is due at
// next. It gives up once IdleUnreachable has passed since the first failure, or when the next
// check would come later than that; otherwise the check at next is still worth waiting for.
func GiveUpIdle(since, next, now time.Time) bool {
	deadline := since.Add(IdleUnreachable)
	return !now.Before(deadline) || next.After(deadline)
}
