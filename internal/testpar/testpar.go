package testpar

import (
	"flag"
	"strconv"
)

// Default sets -test.parallel to n unless the command line gave it. It is called from a
// TestMain, after flag.Parse.
func Default(n int) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(n))
	}
}
