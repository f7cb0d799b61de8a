package crawler

import (
	"flag"
	"os"
	"testing"

	"github.com/crawl-project/crawl/internal/testpar"
)

func TestMain(m *testing.M) {
	flag.Parse()
	testpar.Default(testParallel)
	os.Exit(m.Run())
}

// testParallel is how many of this package's parallel tests run at once unless -parallel says
// otherwise: most wait on rate-limited or slow servers, Retry-After pauses and timeouts, not
// on the CPU (a crawl of a few seconds uses a fraction of a core), so that more than
// GOMAXPROCS (2 on the CI machine) run well at once.
const testParallel = 4
