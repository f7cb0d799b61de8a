package fleet

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"sync"
)

// A host's politeness state is hostlimit's encoding (opaque here); Redis holds it compacted
// (docs/fleet.md "Host state"): one version byte, then, for hostStateV1, the state compressed
// with DEFLATE primed by hostStateDict.
const hostStateV1 = 1

// maxHostState bounds a host's state once inflated: a bigger one is damaged or hostile.
const maxHostState = 64 << 10

// errBadHostState is wrapped by every decoding error of a stored host state.
var errBadHostState = errors.New("fleet: bad host state")

// hostStateDict primes the compressor with what hostlimit's states are made of: the names of
// aimd's and hostlimit's fields, most frequent last. It is part of version 1 of the encoding:
// states saved with it decode only with it, so it never changes (a new dictionary is a new
// version).
const hostStateDict = `"undo_rate":"undo_plateau":"undo_slow":"undo_n":"bits":"held":` +
	`"quick_refusals":true,"refusal_pause":"failure_share":"failure_samples":"fail_cut":` +
	`"refusal_share":"refusal_samples":"refusal_cut":"least_resumed":"first_end":"last_end":` +
	`"block_len":"resumed":"refused":"settled":"misses":"patience":"last_set":"mode":` +
	`"ceiling":"paused_until":"plateau":"decreases":"over_limit":"failures":"elapsed":"hold":` +
	`"steps":"searched":"last_refusal":"kind":"run":"to":"at":"state":"start":"` +
	`{"aimd":{"version":2,"rate":1,"window":1,"baseline":80000000,"slow_start":true,"parts":` +
	`{"curve":{"from":0},"pace":{"probe_time":30000000000},"target":{},"episode":{"from":` +
	`1795797535042821911,"start":1795797535042821911,"last":1795797535042821911},"fit":{"log":` +
	`[[26480000000,0],[25380000000,0],[1180000000,0],[80000000,0]]},"epoch":{"ok":25},` +
	`"fails":{"n":16,"fresh":16},"overs":{"n":16,"fresh":16},"window":{},"last_ok":80000000}},` +
	`"saved_at":"2026-11-27T16:38:28.562936265Z"}`

// stateWriters reuses compressors (each holds about a megabyte of tables).
var stateWriters = sync.Pool{New: func() any {
	w, err := flate.NewWriterDict(io.Discard, flate.DefaultCompression, []byte(hostStateDict))
	if err != nil {
		panic(err) // only for an invalid level, which DefaultCompression is not
	}
	return w
}}

// encodeHostState compacts hostlimit's encoded state b for Redis.
func encodeHostState(b []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(b)/3 + 16)
	buf.WriteByte(hostStateV1)
	w := stateWriters.Get().(*flate.Writer)
	w.Reset(&buf) // keeps the dictionary
	w.Write(b)    // a bytes.Buffer does not fail
	w.Close()
	stateWriters.Put(w)
	return buf.Bytes()
}

// decodeHostState returns hostlimit's encoded state from what Redis holds for host. Damaged or
// hostile bytes give an error naming what is wrong.
func decodeHostState(host string, b []byte) ([]byte, error) {
	if len(b) == 0 || b[0] != hostStateV1 {
		v := "none"
		if len(b) > 0 {
			v = fmt.Sprintf("%#02x", b[0])
		}
		return nil, fmt.Errorf("%w of %q: encoding version %s, want %d", errBadHostState, host, v, hostStateV1)
	}
	r := flate.NewReaderDict(bytes.NewReader(b[1:]), []byte(hostStateDict))
	defer r.Close()
	out, err := io.ReadAll(io.LimitReader(r, maxHostState+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w of %q: %v", errBadHostState, host, err)
	case len(out) > maxHostState:
		return nil, fmt.Errorf("%w of %q: more than %d bytes inflated", errBadHostState, host, maxHostState)
	}
	return out, nil
}
