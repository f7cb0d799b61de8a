package hostlimit

import (
	"encoding/json"
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
