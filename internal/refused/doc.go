// Package refused gives tests a loopback address that refuses connections for as long as the
// test runs.
//
// A port that was listened on and closed refuses only until something else takes it: the
// kernel hands the same ephemeral port to the next listener of the process, often a server the
// same test starts a moment later. Addr instead binds a socket it never listens on and holds it
// until the test ends, so the port stays taken and every connection to it is refused.
package refused
