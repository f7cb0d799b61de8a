package hostlimit

import (
	"encoding/json"
	"math"
	"time"

	"github.com/crawl-project/crawl/aimd"
)

// savedState is one host's persisted state, stored as JSON.
type savedState struct {
	AIMD        aimd.State `json:"aimd"`
	PausedUntil time.Time  `json:"paused_until,omitzero"`
	Ceiling     float64    `json:"ceiling,omitempty"` // robots Crawl-delay cap, req/s; 0 = none
	SavedAt     time.Time  `json:"saved_at"`
}

func encodeState(s savedState) ([]byte, error) { return json.Marshal(s) }

func decodeState(b []byte) (savedState, error) {
	var s savedState
	err := json.Unmarshal(b, &s)
	return s, err
}

// MaxRestoredPause bounds a pause restored from the store: it ends at most this long after it
// was saved, however long the Retry-After that set it, so that a damaged or hostile store (or a
// server's Retry-After of years) defers a host for a day at most, not for good. Within a run a
// pause is honoured as long as it asks.
const MaxRestoredPause = 24 * time.Hour

// restoredPause is s's pause, ending at most MaxRestoredPause after s was saved; a save time in
// the future, or none, counts as now.
func restoredPause(s savedState, now time.Time) time.Time {
	saved := s.SavedAt
	if saved.IsZero() || saved.After(now) {
		saved = now
	}
	if limit := saved.Add(MaxRestoredPause); s.PausedUntil.After(limit) {
		return limit
	}
	return s.PausedUntil
}

// validCeiling is c if it is a positive finite rate, else 0 (no ceiling).
func validCeiling(c float64) float64 {
	if c > 0 && !math.IsInf(c, 0) && !math.IsNaN(c) {
		return c
	}
	return 0
}
