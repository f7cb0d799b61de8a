package crawler

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/crawl-project/crawl/internal/refused"
)

// TestRefusedHostAnnouncedOnce: a seed on a port nothing listens on is announced with its cause
// (connection refused) the first time it fails, and only then, though its robots.txt is tried
// robotsMaxFailures times; the summary's host carries the cause.
func TestRefusedHostAnnouncedOnce(t *testing.T) {
	addr := refused.Addr(t)
	var logs lockedBuffer
	cfg := Defaults()
	cfg.Dir = t.TempDir()
	cfg.Seeds = []string{"http://" + addr + "/"}
	cfg.RobotsRetry = time.Millisecond
	cfg.InitialRate, cfg.MinRate = 100, 50 // the gate's back-off after each refusal stays short
	cfg.StatusEvery = 50 * time.Millisecond
	cfg.Log = slog.New(slog.NewTextHandler(&logs, nil))
	sum := runCrawl(t, cfg)
	if sum.FailedBy["robots-unreachable"] != 1 {
		t.Fatalf("failed by %v, want the seed failed robots-unreachable", sum.FailedBy)
	}
	if n := strings.Count(logs.String(), `msg="host failed"`); n != 1 || !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("%d host failed lines (want 1, with connection refused):\n%s", n, logs.String())
	}
	if len(sum.Hosts) != 1 || sum.Hosts[0].Host != addr || !strings.Contains(sum.Hosts[0].LastError, "connection refused") {
		t.Errorf("summary hosts: %+v", sum.Hosts)
	}
}
