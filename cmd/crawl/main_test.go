package main

import (
	"flag"
	"os"
	"testing"

	"github.com/crawl-project/crawl/internal/testpar"
)

// TestMain lets the test binary act as the crawl command itself when CRAWL_AS_MAIN=1, so tests
// can run real crawl processes (and kill them) without a separate build step.
func TestMain(m *testing.M) {
	if os.Getenv("CRAWL_AS_MAIN") == "1" {
		os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
	}
	if js := os.Getenv("CRAWL_SCRIPT"); js != "" {
		os.Exit(runScriptMain(js))
	}
	flag.Parse()
	testpar.Default(testParallel)
	os.Exit(m.Run())
}

// testParallel is how many of this package's parallel tests run at once unless -parallel says
// otherwise: they mostly wait, on crawl processes they start and on rate-limited servers (about
// 170 s of CPU in a 490 s run), so that on a 2-core machine the default (GOMAXPROCS) left the
// package over go test's 10-minute limit when the machine was loaded.
const testParallel = 4
