package retry

import (
	"sync"
	"time"
)

// Defaults for the zero fields of BudgetConfig.
const (
	DefaultCapacity         = 100
	DefaultRetryCost        = 5
	DefaultSuccessDeposit   = 1
	DefaultFloorPerInterval = 2
	DefaultInterval         = 10 * time.Second
)

// BudgetConfig configures a Budget, plain data. A zero field takes its default.
type BudgetConfig struct {
	Capacity         int           // tokens the bucket holds, and starts with (default 100)
	RetryCost        int           // tokens one retry takes (default 5)
	SuccessDeposit   int           // tokens a first-try success gives back (default 1)
	FloorPerInterval int           // retries allowed per Interval even when empty (default 2)
	Interval         time.Duration // default 10s
}

// Budget is a retry token bucket, as in the AWS SDKs' retry quota: every retry costs
// RetryCost tokens, every first-try success deposits SuccessDeposit, and a retry that succeeds
// gives its cost back (Refund), so retries that fail stay near SuccessDeposit/RetryCost of the
// successful traffic however badly a host fails (default 20%), while retries that work (a
// flaky host failing one request in three at random) cost nothing in the end.
// When the bucket is empty, FloorPerInterval retries per Interval are still allowed, so a quiet
// host with nothing to earn tokens from can still retry now and then.
//
// Use one per host and one for the whole crawl. A refused Withdraw means: defer the URL (try
// it later), never drop it. A Budget is safe for concurrent use by multiple goroutines.
type Budget struct {
	cfg BudgetConfig

	mu         sync.Mutex
	balance    float64
	floorStart time.Time // start of the current floor interval
	floorUsed  int
}

// NewBudget returns a full budget.
func NewBudget(cfg BudgetConfig, now time.Time) *Budget {
	if cfg.Capacity <= 0 {
		cfg.Capacity = DefaultCapacity
	}
	if cfg.RetryCost <= 0 {
		cfg.RetryCost = DefaultRetryCost
	}
	if cfg.SuccessDeposit <= 0 {
		cfg.SuccessDeposit = DefaultSuccessDeposit
	}
	if cfg.FloorPerInterval <= 0 {
		cfg.FloorPerInterval = DefaultFloorPerInterval
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	return &Budget{cfg: cfg, balance: float64(cfg.Capacity), floorStart: now}
}

// Withdraw takes the cost of one retry at now and reports whether the retry may go ahead. It
// takes from the bucket when it holds enough, else from the floor allowance of the current
// interval; false means both are spent: defer the URL.
func (b *Budget) Withdraw(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cost := float64(b.cfg.RetryCost); b.balance >= cost {
		b.balance -= cost
		return true
	}
	if now.Sub(b.floorStart) >= b.cfg.Interval { // a time before floorStart starts nothing new
		b.floorStart, b.floorUsed = now, 0
	}
	if b.floorUsed < b.cfg.FloorPerInterval {
		b.floorUsed++
		return true
	}
	return false
}

// Deposit records a first-try success at now: it adds SuccessDeposit tokens, up to Capacity.
func (b *Budget) Deposit(now time.Time) { b.add(b.cfg.SuccessDeposit) }

// Refund records at now that a retry succeeded (got an answer that is not retried): RetryCost
// tokens go back into the bucket, up to Capacity. The caller need not know whether the retry
// was paid from the bucket, from the floor allowance or deferred by an empty budget: a retry
// that works earns its cost either way, and retries that fail earn nothing.
func (b *Budget) Refund(now time.Time) { b.add(b.cfg.RetryCost) }

// add puts n tokens into the bucket, up to Capacity.
func (b *Budget) add(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.balance = min(b.balance+float64(n), float64(b.cfg.Capacity))
}

// Balance returns the tokens in the bucket.
func (b *Budget) Balance() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.balance
}
