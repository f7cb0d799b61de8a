package main

import (
	"flag"
	"strings"
)

// nearest returns the name in names closest to typed in edit distance (Levenshtein), or ""
// when none is close enough to be a slip: at most 2 edits, and fewer than half of typed's
// length. Ties go to the first in names.
func nearest(typed string, names []string) string {
	if len(typed) > 64 { // a bound on the work a long argument costs
		return ""
	}
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(typed), n); d < bestD && 2*d < len(typed) {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes, with a swap of two
// neighbours counted as one edit ("rnu" is 1 from "run"; optimal string alignment).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// didYouMean is "; did you mean X?" for the name nearest typed, or "".
func didYouMean(typed string, names []string, prefix string) string {
	if n := nearest(typed, names); n != "" {
		return "; did you mean " + prefix + n + "?"
	}
	return ""
}

// namesOfFlags lists fs's flag names.
func namesOfFlags(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}
