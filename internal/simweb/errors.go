package simweb

import "errors"

// ErrBadSpec is returned by Start when a HostSpec or the spec list is invalid (no hosts, a
// duplicate or empty name, a negative count, a Disallow entry that is not a plain path prefix, an
// unknown CrossLinks name, an unsupported RobotsStatus, …). The wrapping error says which.
var ErrBadSpec = errors.New("simweb: bad host spec")
