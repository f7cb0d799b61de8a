//go:build !race

package crawler

// raceEnabled: the tests run under the race detector.
const raceEnabled = false
