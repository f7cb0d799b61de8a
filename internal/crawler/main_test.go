package crawler

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

func TestMain(m *testing.M) {
	flag.Parse()
	parallelByDefault(testParallel)
	os.Exit(m.Run())
}

// testParallel is how many of this package's parallel tests run at once unless -parallel says
// otherwise: most wait on rate-limited or slow servers, Retry-After pauses and timeouts, not
// on the CPU (a crawl of a few seconds uses a fraction of a core), so that more than
// GOMAXPROCS (2 on the CI machine) run well at once.
const testParallel = 4

// parallelByDefault sets -test.parallel to n unless it was given.
func parallelByDefault(n int) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(n))
	}
}
