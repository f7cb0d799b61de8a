package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderNeedsABrowser: --render other than never, with no browser on PATH or --browser
// naming none, is a usage error that says what to install; --render never needs none.
func TestRenderNeedsABrowser(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no browser on it
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"auto, none on PATH", []string{"--render", "auto"}, []string{"--render auto needs Chromium or Chrome", "apt-get install chromium", "--browser PATH"}},
		{"always, --browser none", []string{"--render", "always", "--browser", filepath.Join(dir, "nochrome")}, []string{"--render always needs a browser", "nochrome"}},
		{"bad mode", []string{"--render", "sometimes"}, []string{"--render takes never, auto or always"}},
		{"bad tabs", []string{"--render", "never", "--render-tabs", "-1"}, []string{"--render-tabs must be between 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"--data", filepath.Join(dir, tc.name), "http://127.0.0.1:9/"}, tc.args...)
			if code := runCmd(args, &out, &errb); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
		})
	}
}
