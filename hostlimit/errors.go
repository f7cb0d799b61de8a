package hostlimit

import (
	"errors"
	"fmt"
	"time"
)

// ErrPaused is returned (wrapped in a *PausedError) by Registry.Wait when the host is paused
// (Retry-After) for longer than Config.MaxPause from now. The caller should defer the host's
// work until PausedError.Until instead of holding a worker blocked; test with errors.Is.
var ErrPaused = errors.New("host paused")

// PausedError says which host is paused and until when. It wraps ErrPaused.
type PausedError struct {
	Host  string
	Until time.Time
}

func (e *PausedError) Error() string {
	return fmt.Sprintf("hostlimit: %s: %v until %s", e.Host, ErrPaused, e.Until.Format(time.RFC3339Nano))
}

// Unwrap returns ErrPaused.
func (e *PausedError) Unwrap() error { return ErrPaused }
