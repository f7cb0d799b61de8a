package report

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	headless "github.com/crawl-project/crawl/internal/render"
)

// FindBrowser returns the path of a Chromium or Chrome executable on PATH, or "" if there is
// none (internal/render.FindBrowser).
func FindBrowser() string { return headless.FindBrowser() }

// Screenshot renders the HTML file htmlPath in a headless browser (browser: an executable
// path; "" means FindBrowser) with a window of width × height CSS pixels and writes the top
// of the page as a PNG to pngPath. The browser runs with a fresh profile in a temporary
// directory, without sandbox, GPU, sync, background networking or component updates, so it
// touches nothing outside that directory and the two files. It fails with ErrNoBrowser when
// no browser is found.
func Screenshot(ctx context.Context, browser, htmlPath, pngPath string, width, height int) error {
	if browser == "" {
		browser = FindBrowser()
	}
	if browser == "" {
		return ErrNoBrowser
	}
	abs, err := filepath.Abs(htmlPath)
	if err != nil {
		return err
	}
	out, err := filepath.Abs(pngPath)
	if err != nil {
		return err
	}
	profile, err := os.MkdirTemp("", "crawl-report-browser-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	os.Remove(out) // so a stale file cannot pass for a new screenshot
	cmd := exec.CommandContext(ctx, browser,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
		"--user-data-dir="+profile, "--force-device-scale-factor=1",
		// paint everything before the capture, even when the machine is too busy to keep up
		"--run-all-compositor-stages-before-draw", "--virtual-time-budget=2000",
		fmt.Sprintf("--window-size=%d,%d", width, height),
		"--screenshot="+out,
		"file://"+filepath.ToSlash(abs))
	cmd.Env = append(os.Environ(), "HOME="+profile) // keep the browser's dot-files in the profile
	msg, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", browser, err, msg)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() == 0 {
		return fmt.Errorf("%s wrote no screenshot to %s:\n%s", browser, out, msg)
	}
	return nil
}
