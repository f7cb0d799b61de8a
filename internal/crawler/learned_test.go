package crawler

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/crawl-project/crawl/aimd"
	"github.com/crawl-project/crawl/hostlimit"
	"github.com/crawl-project/crawl/internal/learnedfile"
	"github.com/crawl-project/crawl/storage"
)

// crawlFake drives reg's host for dur of fake time from start against a server token bucket
// (limit req/s, burst 1) that answers 429 with a one-second Retry-After when empty, each answer
// 5 ms after its request. It returns the requests admitted and refused and the time it ended.
func crawlFake(t *testing.T, reg *hostlimit.Registry, server *rate.Limiter, start time.Time, dur time.Duration) (admitted, refused int, end time.Time) {
	t.Helper()
	const host, lat = "a.test", 5 * time.Millisecond
	now := start
	for now.Before(start.Add(dur)) {
		tk, ready := reg.TryAdmit(now, host)
		if tk == nil {
			if ready.IsZero() {
				t.Fatal("window full with nothing in flight")
			}
			now = ready
			continue
		}
		admitted++
		o := aimd.Outcome{Signal: aimd.Success, Latency: lat}
		if !server.AllowN(now, 1) {
			refused++
			o.Signal, o.Pause = aimd.Overload, time.Second
		}
		now = now.Add(lat)
		tk.Done(now, o)
	}
	return admitted, refused, now
}

// TestLearnedFrom: a crawl whose store knows nothing of a host, started from another store
// that learned it (Config.LearnedFrom), starts the host at the learned rate: in its first 10 s
// of fake time it sends at least 0.9 of the learned rate, with no more refusals than the first
// crawl, where a crawl without it climbs from the initial rate.
func TestLearnedFrom(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	const limit = 20.0
	learnedDir, newDir, freshDir := t.TempDir(), t.TempDir(), t.TempDir()
	cfg := func(now time.Time) hostlimit.Config {
		return hostlimit.Config{Now: func() time.Time { return now }}
	}

	db1, err := storage.Open(learnedDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := hostlimit.New(cfg(t0), db1)
	_, firstRefused, end := crawlFake(t, first, rate.NewLimiter(limit, 1), t0, 60*time.Second)
	st, _ := first.Host(end, "a.test")
	learned := st.Limit
	if err := first.Flush(); err != nil {
		t.Fatal(err)
	}
	db1.Close()
	if learned < 0.8*limit || learned > limit {
		t.Fatalf("the first crawl learned %.2f req/s of a %.0f req/s host", learned, limit)
	}

	// The learned states also travel as a file (crawl export --format learned).
	db1, err = storage.Open(learnedDir, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if _, err := learnedfile.Write(&file, func(string) bool { return true }, db1); err != nil {
		t.Fatal(err)
	}
	db1.Close()
	learnedFile := filepath.Join(t.TempDir(), "learned.jsonl")
	if err := os.WriteFile(learnedFile, file.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	later := end.Add(time.Hour)
	for _, src := range []struct{ name, path string }{{"directory", learnedDir}, {"file", learnedFile}} {
		t.Run(src.name, func(t *testing.T) {
			from, err := openLearned(src.path, newDir)
			if err != nil {
				t.Fatal(err)
			}
			defer from.Close()
			db2, err := storage.Open(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db2.Close()
			second := hostlimit.New(cfg(later), learnedStates{own: db2, learned: from})
			n, refused, _ := crawlFake(t, second, rate.NewLimiter(limit, 1), later, 10*time.Second)
			t.Logf("learned %.2f req/s (%d refusals in 60 s); with --learned-from: %d requests in the first 10 s = %.2f req/s, %d refused",
				learned, firstRefused, n, float64(n)/10, refused)
			if got := float64(n) / 10; got < 0.9*learned {
				t.Errorf("first 10 s at %.2f req/s, want at least 0.9 × the learned %.2f", got, learned)
			}
			if refused > firstRefused {
				t.Errorf("%d refusals, more than the first crawl's %d", refused, firstRefused)
			}
			if _, ok, _ := db2.LoadHostState("a.test"); ok {
				t.Error("the learned state was copied into the new store before the host was saved")
			}
		})
	}

	db3, err := storage.Open(freshDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db3.Close()
	fresh, _, _ := crawlFake(t, hostlimit.New(cfg(later), db3), rate.NewLimiter(limit, 1), later, 10*time.Second)
	if float64(fresh)/10 >= 0.9*learned {
		t.Errorf("without --learned-from: %.2f req/s in the first 10 s; the test cannot tell the two apart", float64(fresh)/10)
	}
}

func TestOpenLearnedErrors(t *testing.T) {
	own, empty := t.TempDir(), t.TempDir()
	badFile := filepath.Join(empty, "learned.jsonl")
	os.WriteFile(badFile, []byte(`{"host":"a.test","state":{}}`+"\n"+`{"host":"","state":{}}`+"\n"), 0o644)
	for _, tc := range []struct{ name, dir string }{
		{"own directory", own},
		{"no directory", own + "/missing"},
		{"no store", empty},
		{"bad file", badFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := openLearned(tc.dir, own)
			if err == nil {
				db.Close()
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrUsage) {
				t.Errorf("%v: want a usage error", err)
			}
		})
	}
}
