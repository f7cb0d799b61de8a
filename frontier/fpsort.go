package frontier

// sortByFP sorts r by fingerprint in place (the order of equal fingerprints is unspecified, as
// with slices.SortFunc). Fingerprints are hashes, spread over their range: r is partitioned in
// place on its fingerprints' top byte (American flag sort), each part on the next byte, and
// parts of at most sortSmall entries are sorted by insertion. Each level is one pass over r
// and there are at most 8, so however the fingerprints fall it takes O(len(r)) passes' work
// at most 8 times over, and about two passes for hashes.
func sortByFP(r []fpLoc) {
	sortByFPFrom(r, 56)
}

// sortSmall is the size of a part sortByFP sorts by insertion.
const sortSmall = 48

func sortByFPFrom(r []fpLoc, shift uint) {
	if len(r) <= sortSmall {
		for i := 1; i < len(r); i++ { // insertion sort
			e, j := r[i], i
			for ; j > 0 && r[j-1].fp > e.fp; j-- {
				r[j] = r[j-1]
			}
			r[j] = e
		}
		return
	}
	digit := func(e fpLoc) int { return int(e.fp>>shift) & 0xff }
	var count [256]int
	for _, e := range r {
		count[digit(e)]++
	}
	var start, next [257]int // start[d]: where part d begins; next[d]: its first entry not yet placed
	for d := range 256 {
		start[d+1] = start[d] + count[d]
	}
	next = start
	for d := range 256 {
		for next[d] < start[d+1] {
			e := r[next[d]]
			// Carry e to its part, taking the entry there, until one belongs to part d.
			for to := digit(e); to != d; to = digit(e) {
				r[next[to]], e = e, r[next[to]]
				next[to]++
			}
			r[next[d]] = e
			next[d]++
		}
	}
	if shift == 0 {
		return // every part holds one fingerprint
	}
	for d := range 256 {
		if part := r[start[d]:start[d+1]]; len(part) > 1 {
			sortByFPFrom(part, shift-8)
		}
	}
}
