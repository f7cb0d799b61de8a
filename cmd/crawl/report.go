package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crawl-project/crawl/internal/report"
)

func init() {
	commands["report"] = command{summary: "write an HTML report with per-host charts of a finished crawl", run: reportCmd}
}

const reportSynopsis = `usage: crawl report --data DIR [--out FILE] [--png FILE]

Writes one self-contained HTML page about the crawl in DIR: rates, replies and latency over
time, per host.`

func reportCmd(args []string, stdout, stderr io.Writer) int {
	flags := newFlags("report", reportSynopsis)
	fs := flags.FlagSet
	dir := fs.String("data", "", "data directory of the crawl")
	out := fs.String("out", "", "HTML file to write (default DIR/report.html)")
	png := fs.String("png", "", "also write a screenshot of the report's top to this PNG file (needs Chromium)")
	width := fs.Int("width", 1280, "screenshot width, CSS pixels")
	height := fs.Int("height", 1800, "screenshot height, CSS pixels")
	browser := fs.String("browser", "", "Chromium or Chrome executable for --png (default: found on PATH)")
	pos, code, ok := flags.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if *dir == "" || len(pos) > 0 {
		fmt.Fprintln(stderr, strings.SplitN(reportSynopsis, "\n", 2)[0])
		return exitUsage
	}
	if *width < 200 || *height < 200 {
		fmt.Fprintln(stderr, "crawl report: --width and --height must be at least 200")
		return exitUsage
	}
	if *out == "" {
		*out = filepath.Join(*dir, "report.html")
	}
	path, err := writeReport(*dir, *out)
	if err != nil {
		fmt.Fprintf(stderr, "crawl report: %v\n", err)
		return exitRuntime
	}
	fmt.Fprintf(stdout, "report: %s\n", path)
	if *png != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := report.Screenshot(ctx, *browser, path, *png, *width, *height); err != nil {
			fmt.Fprintf(stderr, "crawl report: screenshot: %v\n", err)
			return exitRuntime
		}
		fmt.Fprintf(stdout, "screenshot: %s\n", *png)
	}
	return exitOK
}

// writeReport renders the report of the crawl in dir to out (atomically: a temporary file
// renamed into place) and returns out's absolute path.
func writeReport(dir, out string) (string, error) {
	d, err := report.Load(dir)
	if err != nil {
		if errors.Is(err, report.ErrRunning) {
			return "", fmt.Errorf("%s: %w", dir, err)
		}
		return "", err
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(abs), ".report-*.html")
	if err != nil {
		return "", err
	}
	if err := report.Write(tmp, d, time.Now()); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	if err := os.Rename(tmp.Name(), abs); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return abs, nil
}
