package hostlimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/crawl-project/crawl/aimd"
)

// TestRestoredPauseBounded: a pause restored from the store ends at most MaxRestoredPause
// after it was saved, whatever it says (a damaged store, a Retry-After of years), and a save
// time in the future counts as now; a shorter pause is restored as saved.
func TestRestoredPauseBounded(t *testing.T) {
	far := "9999-12-31T23:59:59Z"
	for _, tc := range []struct {
		name, until, savedAt string
		want                 time.Time
	}{
		{"far pause", far, t0.Add(-time.Hour).Format(time.RFC3339), t0.Add(-time.Hour + MaxRestoredPause)},
		{"saved in the future", far, far, t0.Add(MaxRestoredPause)},
		{"no save time", far, "", t0.Add(MaxRestoredPause)},
		{"short pause", t0.Add(5 * time.Minute).Format(time.RFC3339), t0.Add(-time.Minute).Format(time.RFC3339), t0.Add(5 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newFakeStore()
			saved := ""
			if tc.savedAt != "" {
				saved = fmt.Sprintf(`,"saved_at":%q`, tc.savedAt)
			}
			store.m["a.test"] = fmt.Appendf(nil, `{"aimd":{"rate":4,"window":2},"paused_until":%q%s}`, tc.until, saved)
			r, _ := newTestRegistry(t, Config{AIMD: testAIMD(2, 2)}, store)
			if tk, ready := r.TryAdmit(t0, "a.test"); tk != nil || !ready.Equal(tc.want) {
				t.Fatalf("ticket %v, ready at %v; want paused until %v", tk != nil, ready, tc.want)
			}
		})
	}
}

// hintStore is a fakeStore with hints (HintStore).
type hintStore struct {
	*fakeStore
	hints map[string][]byte
}

func (s hintStore) LoadHostHint(host string) ([]byte, bool, error) {
	b, ok := s.hints[host]
	return b, ok, nil
}

// TestHintIsAStart: a host with no state of its own starts from its hint's rate and window
// (clamped into [InitialRate, MaxRate]), never from its pause or ceiling; its own state wins
// over a hint; and a host that holds only a hint (no outcome yet) is not saved.
func TestHintIsAStart(t *testing.T) {
	store := hintStore{newFakeStore(), map[string][]byte{
		"a.test": []byte(`{"aimd":{"rate":50,"window":6},"paused_until":"9999-12-31T23:59:59Z","ceiling":1e-300}`),
		"b.test": []byte(`{"aimd":{"rate":1e-300,"window":1}}`),
		"c.test": []byte(`{"aimd":{"rate":50,"window":6}}`),
	}}
	store.m["c.test"] = []byte(`{"aimd":{"rate":3,"window":1}}`)
	r, _ := newTestRegistry(t, Config{AIMD: testAIMD(2, 2)}, store)
	for _, tc := range []struct {
		host        string
		limit       float64
		window      int
		giveOutcome bool
	}{
		{"a.test", 50, 6, true},
		{"b.test", 2, 2, false}, // below InitialRate: as if there were no hint
		{"c.test", 3, 1, false}, // its own state
	} {
		tk, ready := r.TryAdmit(t0, tc.host)
		if tk == nil {
			t.Fatalf("%s: not admitted (ready at %v): a hint's pause or ceiling was obeyed", tc.host, ready)
		}
		if tc.giveOutcome {
			tk.Done(t0.Add(time.Millisecond), aimd.Outcome{Signal: aimd.Success, Latency: time.Millisecond})
		} else {
			defer tk.Done(t0.Add(time.Millisecond), aimd.Outcome{Signal: aimd.Neutral})
		}
		st := mustHost(t, r, t0, tc.host)
		if st.Ceiling != 0 || st.Limit < tc.limit*0.99 || st.Limit > tc.limit*1.2 || st.Window != tc.window {
			t.Errorf("%s: limit %v, window %d, ceiling %v; want %v, %d, none", tc.host, st.Limit, st.Window, st.Ceiling, tc.limit, tc.window)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"a.test", "b.test", "c.test"} {
		_, saved := store.get(h)
		if want := h != "b.test"; saved != want {
			t.Errorf("%s saved: %v, want %v", h, saved, want)
		}
	}
}
