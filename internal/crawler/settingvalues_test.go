package crawler

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestDepthForms: a Depth's zero is no cap and SeedsOnly the seeds alone; its text and JSON are
// the flag's number (-1 no cap, 0 the seeds), read back to the same Depth.
func TestDepthForms(t *testing.T) {
	for _, tc := range []struct {
		d      Depth
		form   string
		hops   int
		capped bool
	}{
		{0, "-1", 0, false},
		{SeedsOnly, "0", 0, true},
		{1, "1", 1, true},
		{40, "40", 40, true},
	} {
		if hops, capped := tc.d.Hops(); hops != tc.hops || capped != tc.capped {
			t.Errorf("%d.Hops() = %d, %v; want %d, %v", int(tc.d), hops, capped, tc.hops, tc.capped)
		}
		b, err := json.Marshal(tc.d)
		if err != nil || string(b) != tc.form || tc.d.String() != tc.form {
			t.Errorf("Depth %d: JSON %s (%v), text %s; want %s", int(tc.d), b, err, tc.d, tc.form)
		}
		var back, fromText Depth
		if err := json.Unmarshal(b, &back); err != nil || back != tc.d {
			t.Errorf("JSON %s read as %d (%v), want %d", b, int(back), err, int(tc.d))
		}
		if err := fromText.UnmarshalText([]byte(tc.form)); err != nil || fromText != tc.d {
			t.Errorf("text %s read as %d (%v), want %d", tc.form, int(fromText), err, int(tc.d))
		}
	}
	var d Depth
	for _, bad := range []string{"-2", "x", "1.5"} {
		if err := d.UnmarshalText([]byte(bad)); err == nil || !strings.Contains(err.Error(), "--max-depth") {
			t.Errorf("text %q: %v, want an error naming --max-depth", bad, err)
		}
	}
}

// TestSettingsJSONRoundTrip: settings written as the store keeps them read back equal, typed
// values included.
func TestSettingsJSONRoundTrip(t *testing.T) {
	s := Defaults().Settings
	s.Scope, s.MaxDepth, s.RequisitesScope = ScopeDomain, SeedsOnly, RequisitesScopeHost
	s.Include = Patterns{regexp.MustCompile(`a\.b`)}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"scope":"domain"`, `"max_depth":0`, `"requisites_scope":"host"`, `"include":["a\\.b"]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s, want it to hold %s", b, want)
		}
	}
	var back Settings
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d := diff(s, back); len(d) > 0 || !reflect.DeepEqual(back.Include.Strings(), s.Include.Strings()) {
		t.Errorf("read back with changes %v", d)
	}
}

// TestZeroConfigTakesDefaults: a Config left zero but for its directory is valid and crawls with
// Defaults' settings; a zero given where a default would be is refused by ValidateGiven.
func TestZeroConfigTakesDefaults(t *testing.T) {
	c := Config{Dir: "d"}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate of a zero Config: %v", err)
	}
	got, want := c.WithDefaults(), Defaults()
	want.Dir = "d"
	if d := diff(got.Settings, want.Settings); len(d) > 0 || got.Workers != want.Workers || got.Retry != want.Retry {
		t.Errorf("WithDefaults: changes %v from Defaults", d)
	}
	if err := c.ValidateGiven(); err == nil {
		t.Error("ValidateGiven of a zero Config: no error")
	}
	given := Defaults()
	given.Dir, given.Workers = "d", 0
	if err := given.ValidateGiven(); err == nil || !strings.Contains(err.Error(), "--workers") {
		t.Errorf("ValidateGiven with --workers 0: %v, want an error naming --workers", err)
	}
}

// TestMaxPagesRevisesOnlyAfterRequisites: a larger --max-pages revises the URLs already seen
// only when the stored run had --requisites (whose spent budget set queued pages aside); any
// other run left them queued, and walking a million of them on resume bought nothing. A change
// of a setting that excludes URLs revises either way.
func TestMaxPagesRevisesOnlyAfterRequisites(t *testing.T) {
	was := Settings{MaxPages: 30000}
	for _, tc := range []struct {
		requisites bool
		edit       func(*Settings)
		want       bool
	}{
		{false, func(s *Settings) { s.MaxPages = 35000 }, false},
		{true, func(s *Settings) { s.MaxPages = 35000 }, true},
		{false, func(s *Settings) { s.MaxDepth = 3 }, true},
		{false, func(s *Settings) { s.MaxPages, s.Requisites = 35000, true }, true},
		{false, func(*Settings) {}, false},
	} {
		was.Requisites = tc.requisites
		now := was
		tc.edit(&now)
		if got := revises(diff(was, now), was); got != tc.want {
			t.Errorf("stored requisites %v, change %v: revises %v, want %v", tc.requisites, diff(was, now), got, tc.want)
		}
	}
}
