package crawler

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/crawl-project/crawl/aimd"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/storage"
)

// TestLearnedHintsBounded: a learned-politeness file is a hint. Whatever state it brings for a
// host (a pause to year 9999, a ceiling of 1e-300 req/s, a rate of 1e-300, negative or
// malformed values, a forged controller state), the new crawl's first 10 s of fake time
// against a 20 req/s host admit at least as many requests as a crawl without the file, the
// state it saves holds no pause or ceiling, and the next run on its store alone (no
// --learned-from) is not deferred and crawls at the same speed.
func TestLearnedHintsBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const limit = 20.0
	cfg := hostlimit.Config{Now: func() time.Time { return t0 }}
	freshDB, err := storage.Open(t.TempDir(), &storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer freshDB.Close()
	fresh, _, _ := crawlFake(t, hostlimit.New(cfg, freshDB), rate.NewLimiter(limit, 1), t0, 10*time.Second)

	for _, tc := range []struct{ name, state string }{
		{"pause to 9999", `{"aimd":{"rate":18,"window":2},"paused_until":"9999-12-31T23:59:59Z","saved_at":"2026-12-01T11:00:00Z"}`},
		{"ceiling 1e-300", `{"aimd":{"rate":18,"window":2},"ceiling":1e-300}`},
		{"rate 1e-300", `{"aimd":{"rate":1e-300,"window":1,"plateau":1e-300}}`},
		{"negative", `{"aimd":{"rate":-5,"window":-5,"decreases":-3,"baseline":-1},"ceiling":-1,"paused_until":"9999-12-31T23:59:59Z"}`},
		{"malformed", `{"aimd":{"rate":"NaN","window":2}}`},
		{"out of range", `{"aimd":{"rate":1e999}}`},
		{"forged controller", `{"aimd":{"version":2,"rate":18,"window":2,"fail_cut":1e-300,"failure_share":1,"failure_samples":1000000,"refusal_cut":1e-300,"refusal_share":1,"refusal_samples":1000000,"refusal_pause":3153600000000000000,"parts":{"curve":{"plateau":1e-300}}},"ceiling":1e-300,"paused_until":"9999-12-31T23:59:59Z","saved_at":"9999-12-31T23:59:59Z"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "learned.jsonl")
			if err := os.WriteFile(file, []byte(`{"host":"a.test","state":`+tc.state+"}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			ownDir := t.TempDir()
			from, err := openLearned(file, ownDir)
			if err != nil {
				t.Fatal(err)
			}
			defer from.Close()
			own, err := storage.Open(ownDir, &storage.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer own.Close()
			reg := hostlimit.New(cfg, learnedStates{own: own, learned: from})
			n, refused, end := crawlFake(t, reg, rate.NewLimiter(limit, 1), t0, 10*time.Second)
			t.Logf("with the file: %d requests in 10 s (%d refused); without: %d", n, refused, fresh)
			if n < fresh {
				t.Errorf("%d requests in the first 10 s, fewer than the %d of a crawl without the file", n, fresh)
			}
			if err := reg.Flush(); err != nil {
				t.Fatal(err)
			}
			b, ok, err := own.LoadHostState("a.test")
			if err != nil || !ok {
				t.Fatalf("the host's own state was not saved: %v", err)
			}
			var saved struct {
				PausedUntil time.Time `json:"paused_until"`
				Ceiling     float64   `json:"ceiling"`
			}
			if err := json.Unmarshal(b, &saved); err != nil {
				t.Fatal(err)
			}
			if saved.PausedUntil.After(end) || saved.Ceiling != 0 {
				t.Errorf("saved %s: a pause or ceiling the file brought outlives the run", b)
			}

			// The next run, on the own store alone.
			next := end.Add(time.Minute)
			reg2 := hostlimit.New(hostlimit.Config{Now: func() time.Time { return next }}, own)
			if tk, ready := reg2.TryAdmit(next, "a.test"); tk == nil {
				t.Fatalf("the next run without the file: host not admitted, ready at %v", ready)
			} else {
				tk.Done(next.Add(5*time.Millisecond), aimd.Outcome{Signal: aimd.Success, Latency: 5 * time.Millisecond})
			}
			n2, _, _ := crawlFake(t, reg2, rate.NewLimiter(limit, 1), next, 10*time.Second)
			if n2 < fresh {
				t.Errorf("the next run: %d requests in 10 s, fewer than the %d of a crawl never given the file", n2, fresh)
			}
		})
	}
}
