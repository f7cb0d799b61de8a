package simweb

import (
	"testing"
	"time"
)

func TestIdealMakespan(t *testing.T) {
	tests := []struct {
		name string
		spec HostSpec
		want time.Duration
	}{
		{"unlimited", HostSpec{Pages: 100}, 0},
		{"limited", HostSpec{Pages: 100, Limit: 10}, 10 * time.Second},
		{"workers", HostSpec{Pages: 100, Workers: 4, Service: 40 * time.Millisecond}, time.Second},
		{"both, rate binds", HostSpec{Pages: 100, Limit: 5, Workers: 4, Service: 40 * time.Millisecond}, 20 * time.Second},
		{"drop before done", HostSpec{Pages: 200, Limit: 20, LimitDrop: &LimitChange{After: 5 * time.Second, Factor: 0.25}}, 25 * time.Second},
		{"drop after done", HostSpec{Pages: 50, Limit: 20, LimitDrop: &LimitChange{After: 5 * time.Second, Factor: 0.25}}, 2500 * time.Millisecond},
		{"robots 503", HostSpec{Pages: 100, Limit: 1, RobotsStatus: 503}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IdealMakespan(tc.spec); got != tc.want {
				t.Errorf("IdealMakespan = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestScenarioShapes(t *testing.T) {
	slowest := func(specs []HostSpec) time.Duration {
		var m time.Duration
		for _, s := range specs {
			m = max(m, IdealMakespan(s))
		}
		return m
	}
	tests := []struct {
		name           string
		specs          []HostSpec
		hosts          [2]int
		pages          [2]int
		slowestBetween [2]time.Duration
	}{
		{"small", Small(), [2]int{2, 3}, [2]int{10, 30}, [2]time.Duration{0, time.Second}},
		{"demo", DemoWeb(), [2]int{4, 6}, [2]int{40, 80}, [2]time.Duration{5 * time.Second, 15 * time.Second}},
		{"bench", PolitenessBench(), [2]int{8, 12}, [2]int{100, 1000}, [2]time.Duration{20 * time.Second, 40 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if n := len(tc.specs); n < tc.hosts[0] || n > tc.hosts[1] {
				t.Errorf("%d hosts", n)
			}
			for _, s := range tc.specs {
				if s.Pages < tc.pages[0] || s.Pages > tc.pages[1] {
					t.Errorf("host %s: %d pages", s.Name, s.Pages)
				}
			}
			if m := slowest(tc.specs); m < tc.slowestBetween[0] || m > tc.slowestBetween[1] {
				t.Errorf("slowest host needs %v, want within %v", m, tc.slowestBetween)
			}
			if err := validate(tc.specs, false); err != nil {
				t.Error(err)
			}
			// From the first host's root alone, cross-links must reach every host.
			reach := map[string]bool{tc.specs[0].Name: true}
			for changed := true; changed; {
				changed = false
				for _, s := range tc.specs {
					for _, c := range s.CrossLinks {
						if reach[s.Name] && !reach[c] {
							reach[c], changed = true, true
						}
					}
				}
			}
			if len(reach) != len(tc.specs) {
				t.Errorf("one seed reaches only %v", reach)
			}
		})
	}
	// The bench must contain each behaviour the issue names.
	has := map[string]bool{}
	for _, s := range PolitenessBench() {
		switch {
		case s.LimitDrop != nil && s.LimitDrop.Factor == 0.25:
			has["drop4x"] = true
		case s.Workers > 0 && s.Limit == 0:
			has["workers"] = true
		case s.BanAfter > 0:
			has["ban"] = true
		case s.Pages == 1000 && s.Limit == 50:
			has["burst"] = true
		case s.Limit == 0:
			has["unlimited"] = true
		}
		if s.Limit > 0 {
			has[s.Reply.String()] = true
		}
	}
	for _, k := range []string{"drop4x", "workers", "ban", "burst", "unlimited",
		"429+seconds", "429+date", "429", "503+seconds"} {
		if !has[k] {
			t.Errorf("PolitenessBench lacks %s", k)
		}
	}
}
