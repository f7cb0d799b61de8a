package main

import (
	"encoding/json"
	"testing"
)

// TestStoppedStatusKeepsP95: crawl status of a stopped crawl shows each host's p95 latency as
// the run last measured it, not 0.0 ms.
func TestStoppedStatusKeepsP95(t *testing.T) {
	t.Parallel()
	site := tinySite(t)
	dir := t.TempDir()
	if code, out, errOut := crawlCmd(t, "", "run", "--data", dir, "--quiet", site+"/"); code != exitOK {
		t.Fatalf("crawl run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := crawlCmd(t, "", "status", "--data", dir, "--json")
	if code != exitOK {
		t.Fatalf("crawl status: exit %d\n%s", code, errOut)
	}
	var st struct {
		Hosts []struct {
			Host  string  `json:"host"`
			P95Ms float64 `json:"p95_ms"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Hosts) != 1 {
		t.Fatalf("status --json: %v, %d hosts\n%s", err, len(st.Hosts), out)
	}
	if st.Hosts[0].P95Ms <= 0 {
		t.Errorf("host %s: p95 %v ms after the run, want the p95 it measured (> 0)", st.Hosts[0].Host, st.Hosts[0].P95Ms)
	}
}
