// Package netguard keeps a crawler fed links by strangers from being steered into the network
// it runs in (SSRF). Its Guard checks the address actually dialled — after DNS resolution, on
// every connection, redirects and DNS rebinding included — and refuses loopback, private,
// link-local (169.254.0.0/16, cloud metadata), unique-local, shared (CGNAT), multicast and
// unspecified addresses unless their range was allowed. It is written by hand because it is a
// few lines over net/netip and no library does exactly this check at dial time.
package netguard
