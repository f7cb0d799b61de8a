//go:build race

package simweb

// raceEnabled lets the slowest walk (2,600 pages) skip under the race detector, where it takes
// seconds; plain `go test` still runs it.
const raceEnabled = true
