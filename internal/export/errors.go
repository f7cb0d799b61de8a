package export

import "errors"

var (
	// ErrOutputExists is returned by CreateOutput, NewWARC, NewMirror and WARCWriter.Write (on
	// rotation) when an output file, or a non-empty mirror directory, already exists: export
	// overwrites only through ReplaceOutput or WARCOptions.Replace.
	ErrOutputExists = errors.New("output already exists")

	// ErrClosed is returned by Write on a Writer that has been closed.
	ErrClosed = errors.New("writer closed")

	// ErrBadFilter is returned by NewFilter for a malformed --status or --host value.
	ErrBadFilter = errors.New("bad filter")

	// ErrBadField is returned by ParseFields for a malformed --field: no name, a bad CSS
	// selector or attribute, a name given twice, or (NewCSV) the name "url".
	ErrBadField = errors.New("bad field")

	// ErrUnsafePath is returned by MirrorWriter.Write if a computed path would leave the
	// mirror root. The mapping is designed never to produce one; this is the safety net.
	ErrUnsafePath = errors.New("unsafe mirror path")
)
