// Package mirrorcheck checks an offline mirror as a browser reading it from disk would: every
// link and requisite in its HTML and CSS files that is not an absolute URL must name a file
// inside the mirror. It parses with golang.org/x/net/html, independently of the code that wrote the
// mirror, so tests can use it as an oracle.
package mirrorcheck
