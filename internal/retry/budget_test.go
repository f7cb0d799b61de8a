package retry

import (
	"sync"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	t0 := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	cfg := BudgetConfig{Capacity: 20, RetryCost: 5, SuccessDeposit: 1, FloorPerInterval: 2, Interval: 10 * time.Second}
	type step struct {
		at      time.Duration
		op      string // "w" withdraw, "d" deposit
		want    bool   // for "w"
		balance float64
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"starts full; retries cost", []step{
			{0, "w", true, 15}, {0, "w", true, 10}, {0, "w", true, 5}, {0, "w", true, 0},
		}},
		{"empty: the floor allows a few per interval, then defer", []step{
			{0, "w", true, 15}, {0, "w", true, 10}, {0, "w", true, 5}, {0, "w", true, 0},
			{1 * time.Second, "w", true, 0}, {2 * time.Second, "w", true, 0}, {3 * time.Second, "w", false, 0},
			{9 * time.Second, "w", false, 0},
			{11 * time.Second, "w", true, 0}, {12 * time.Second, "w", true, 0}, {13 * time.Second, "w", false, 0},
		}},
		{"first-try successes earn retries back", []step{
			{0, "w", true, 15}, {0, "w", true, 10}, {0, "w", true, 5}, {0, "w", true, 0},
			{0, "d", false, 1}, {0, "d", false, 2}, {0, "d", false, 3}, {0, "d", false, 4}, {0, "d", false, 5},
			{0, "w", true, 0},
		}},
		{"deposits stop at capacity", []step{
			{0, "d", false, 20}, {0, "w", true, 15}, {0, "d", false, 16},
		}},
		{"a clock going backwards grants nothing more", []step{
			{0, "w", true, 15}, {0, "w", true, 10}, {0, "w", true, 5}, {0, "w", true, 0},
			{15 * time.Second, "w", true, 0}, {15 * time.Second, "w", true, 0}, {15 * time.Second, "w", false, 0},
			{time.Second, "w", false, 0}, {24 * time.Second, "w", false, 0}, {25 * time.Second, "w", true, 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBudget(cfg, t0)
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				switch s.op {
				case "w":
					if got := b.Withdraw(now); got != s.want {
						t.Errorf("step %d: Withdraw at %v = %v, want %v", i, s.at, got, s.want)
					}
				case "d":
					b.Deposit(now)
				}
				if got := b.Balance(); got != s.balance {
					t.Errorf("step %d: Balance = %v, want %v", i, got, s.balance)
				}
			}
		})
	}
}

func TestBudgetDefaults(t *testing.T) {
	t0 := time.Now()
	b := NewBudget(BudgetConfig{}, t0)
	if b.Balance() != DefaultCapacity {
		t.Errorf("Balance = %v, want %v", b.Balance(), DefaultCapacity)
	}
	// 100 tokens at 5 per retry: 20 retries, then the floor (2), then none.
	n := 0
	for b.Withdraw(t0) {
		n++
	}
	if n != 22 {
		t.Errorf("%d retries from a full default budget in one instant, want 20 + 2", n)
	}
}

func TestBudgetSteadyShare(t *testing.T) {
	// A host that fails a third of first tries: retries are held near SuccessDeposit/RetryCost
	// of the successes once the initial capacity is spent.
	t0 := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	b := NewBudget(BudgetConfig{}, t0)
	ok, retried := 0, 0
	for i := 0; i < 30000; i++ {
		now := t0.Add(time.Duration(i) * 10 * time.Millisecond) // 100 req/s for 5 minutes
		if i%3 == 0 {
			if b.Withdraw(now) {
				retried++
			}
			continue
		}
		b.Deposit(now)
		ok++
	}
	share := float64(retried) / float64(ok)
	t.Logf("%d successes, %d retries allowed (%.1f%%)", ok, retried, 100*share)
	if share < 0.19 || share > 0.22 {
		t.Errorf("retry share %.3f, want about 0.2", share)
	}
}

func TestBudgetConcurrent(t *testing.T) {
	t0 := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	b := NewBudget(BudgetConfig{Capacity: 1000, RetryCost: 1, FloorPerInterval: 1, Interval: time.Hour}, t0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if b.Withdraw(t0) {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if granted != 1001 {
		t.Errorf("granted %d of 1600 withdrawals, want exactly 1000 + 1 floor", granted)
	}
}

func TestBudgetRefund(t *testing.T) {
	// A host that fails a third of first tries at random: its retries work, and each one that
	// succeeds gives its cost back, so the budget never runs dry. Without the refunds the
	// retries are held near 20% of the successes (TestBudgetSteadyShare) and the rest deferred.
	t0 := time.Date(2025, 3, 4, 12, 0, 0, 0, time.UTC)
	b := NewBudget(BudgetConfig{}, t0)
	refused := 0
	for i := 0; i < 30000; i++ {
		now := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		if i%3 != 0 {
			b.Deposit(now)
			continue
		}
		if !b.Withdraw(now) {
			refused++
			continue
		}
		b.Refund(now) // the retry succeeded
	}
	if refused != 0 || b.Balance() != DefaultCapacity {
		t.Errorf("%d retries refused, balance %.0f; want 0 and a full bucket", refused, b.Balance())
	}
}
