package render

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMissingBrowser: Start without a browser is ErrNoBrowser; and the tests themselves fail
// under CI=true when there is none on PATH, and skip otherwise.
func TestMissingBrowser(t *testing.T) {
	if os.Getenv("RENDER_NO_BROWSER_CHILD") == "1" {
		browserPath(t)
		return
	}
	if _, err := Start(t.Context(), Options{Browser: "/nonexistent/chromium"}); err == nil || !strings.Contains(err.Error(), "no headless browser") {
		t.Errorf("Start with a missing browser: %v, want ErrNoBrowser", err)
	}
	for _, tc := range []struct {
		ci       string
		wantFail bool
		want     string
	}{
		{"true", true, "under CI=true"},
		{"", false, "SKIP"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingBrowser$", "-test.v")
		cmd.Env = []string{"RENDER_NO_BROWSER_CHILD=1", "PATH=" + t.TempDir(), "CI=" + tc.ci}
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tc.wantFail || !strings.Contains(string(out), tc.want) {
			t.Errorf("CI=%q: failed=%v, want %v, output lacks %q or is:\n%s", tc.ci, failed, tc.wantFail, tc.want, out)
		}
	}
}
