// Package testpar sets how many of a test binary's parallel tests run at once, for packages
// whose tests mostly wait (on servers they start, on pauses, on crawl processes) rather than
// use the CPU, so that more than GOMAXPROCS of them run well together.
package testpar
