package frontier

import (
	"bytes"
	"encoding/binary"
)

// encode writes r as a legacy record (version 2, or 3 for a Role other than RolePage), as the
// frontier wrote them before format 3: the fixtures of the upgrade tests.
func (r *record) encode() []byte {
	b := make([]byte, 0, 24+len(r.host)+len(r.parent)+len(r.reason)+len(r.detail))
	version := byte(recordVersion)
	if r.role != RolePage {
		version = recordVersion3
	}
	b = append(b, version, r.state)
	b = binary.AppendUvarint(b, uint64(r.depth))
	b = binary.AppendUvarint(b, uint64(r.attempts))
	b = binary.AppendUvarint(b, uint64(r.status))
	b = binary.AppendUvarint(b, r.pageSeq)
	b = binary.AppendUvarint(b, uint64(r.hops))
	switch p := hostPrefix(r.host); {
	case r.qkey == nil:
		b = append(b, qkeyNone)
	case len(r.qkey) == len(p)+8 && bytes.HasPrefix(r.qkey, p):
		b = append(b, qkeyQueue)
		b = binary.AppendUvarint(b, binary.BigEndian.Uint64(r.qkey[len(p):]))
	default:
		b = append(b, qkeyVerbatim)
		b = binary.AppendUvarint(b, uint64(len(r.qkey)))
		b = append(b, r.qkey...)
	}
	b = binary.AppendUvarint(b, uint64(len(r.host)))
	b = append(b, r.host...)
	b = appendHostRelative(b, r.host, r.parent)
	for _, s := range []string{r.reason, r.detail} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	if version == recordVersion3 {
		b = append(b, byte(r.role))
	}
	return b
}

func hostPrefix(host string) []byte {
	return append([]byte(host), 0)
}
