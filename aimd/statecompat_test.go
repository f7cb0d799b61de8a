package aimd

import (
	"encoding/json"
	"testing"
)

// TestStateFromEarlierBuildLoads: a version-2 State, which also held the controller's inner
// parts, still loads: its rate, window, plateau and counters are taken and its parts ignored,
// so the controller holds under the plateau and probes (docs/aimd.md, R11).
func TestStateFromEarlierBuildLoads(t *testing.T) {
	t.Parallel()
	const saved = `{"version":2,"rate":1.9600001254858586,"window":2,"plateau":1.96,"baseline":1000000,"decreases":1,"over_limit":1,"p95":1000000,"quick_refusals":true,"parts":{"curve":{"from":1.94,"elapsed":3034254655,"steps":6},"pace":{"probe_time":30000000000,"last_refusal":4},"target":{"rate":4,"kind":3},"episode":{"rate":1.94,"refused":4,"start":3035254655,"last":3035254655},"fit":{"from":3035254655,"log":[[3565254655,0],[3065254655,0],[3035254655,1],[2565254655,0],[2049790738,0],[1535572607,0],[1022713864,0],[511204081,0],[1000000,0]]},"epoch":{"start":3034254655,"ok":6},"fails":{"n":9,"fresh":6},"overs":{"bits":64,"n":9,"fresh":6,"undo_rate":4,"undo_slow":true,"undo_n":1},"window":{},"last_ok":1000000}}`
	var s State
	if err := json.Unmarshal([]byte(saved), &s); err != nil {
		t.Fatal(err)
	}
	st := Restore(Config{}, s, t0).Stats()
	t.Logf("restored: rate %.2f, window %d, phase %s, plateau %.2f", st.Rate, st.Window, st.Phase, st.Plateau)
	if !near(st.Rate, 1.96, 0.001) || st.Window != 2 || st.Plateau != 1.96 || st.Decreases != 1 || st.Phase != PhaseProbe {
		t.Errorf("restored rate %.3f, window %d, plateau %.2f, %d decreases, %s; want the saved 1.96, 2, 1.96, 1, probing",
			st.Rate, st.Window, st.Plateau, st.Decreases, st.Phase)
	}
}
