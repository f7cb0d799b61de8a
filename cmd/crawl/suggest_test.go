package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/aimd"
)

// TestMistypedNameSuggestsNearest: a mistyped command or flag is answered with the nearest
// name, when one is near; a name near none gets no guess.
func TestMistypedNameSuggestsNearest(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string // "" : no suggestion
	}{
		{[]string{"rnu"}, "did you mean run?"},
		{[]string{"exprot"}, "did you mean export?"},
		{[]string{"help", "stauts"}, "did you mean status?"},
		{[]string{"xy"}, ""},
		{[]string{"run", "--max-rates", "3", "--data", "d"}, "did you mean --max-rate?"},
		{[]string{"run", "--max-rates=3", "--data", "d"}, "did you mean --max-rate?"},
		{[]string{"export", "--fromat", "csv"}, "did you mean --format?"},
		{[]string{"status", "--zzz"}, ""},
	} {
		var out, errOut bytes.Buffer
		if code := dispatch(tt.args, &out, &errOut); code != exitUsage {
			t.Errorf("crawl %q: exit %d, want %d", tt.args, code, exitUsage)
		}
		msg := errOut.String()
		if tt.want == "" && strings.Contains(msg, "did you mean") || !strings.Contains(msg, tt.want) {
			t.Errorf("crawl %q: %q; want %q", tt.args, msg, tt.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"run", "run", 0}, {"rnu", "run", 1}, {"max-rates", "max-rate", 1}, {"kitten", "sitting", 3}, {"", "abc", 3}} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestInvokedAs: the demo's "next:" line names a command that works: go run's when the binary
// is one go run built, else the binary as it was called.
func TestInvokedAs(t *testing.T) {
	for arg0, want := range map[string]string{
		"/tmp/go-build1234567/b001/exe/crawl": "go run ./cmd/crawl",
		"./crawl":                             "./crawl",
		"crawl":                               "crawl",
		"/usr/local/bin/crawl":                "/usr/local/bin/crawl",
	} {
		if got := invokedAs(arg0); got != want {
			t.Errorf("invokedAs(%q) = %q, want %q", arg0, got, want)
		}
	}
}

// TestStatusHelpExplainsPhases: every phase crawl status can show is explained in its help.
func TestStatusHelpExplainsPhases(t *testing.T) {
	var out, errOut bytes.Buffer
	dispatch([]string{"help", "status"}, &out, &errOut)
	for p := aimd.Phase(0); p.String() != "unknown"; p++ {
		if !strings.Contains(out.String(), "\n  "+p.String()+" ") {
			t.Errorf("crawl help status does not explain phase %q:\n%s", p, out.String())
		}
	}
}
