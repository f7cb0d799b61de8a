package frontier

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"math/bits"
)

// fpKey is the secret key of a store's URL fingerprints (SipHash-2-4, a keyed pseudorandom
// function): drawn at random when the store gets its fingerprint bucket and kept in it, so a
// fingerprint is the same in every process that opens the store, and a web page cannot choose
// URLs whose fingerprints collide with another URL's.
type fpKey struct{ k0, k1 uint64 }

// fpKeyName is the key of the store's fpKey in bucketMeta.
var fpKeyName = []byte("fingerprint-key")

func newFPKey() (fpKey, []byte) {
	var b [16]byte
	rand.Read(b[:]) // never returns an error (crypto/rand)
	k, _ := parseFPKey(b[:])
	return k, b[:]
}

func parseFPKey(b []byte) (fpKey, error) {
	if len(b) != 16 {
		return fpKey{}, errors.New("bad fingerprint key")
	}
	return fpKey{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])}, nil
}

// sum returns the fingerprint of url (or of any bytes): SipHash-2-4 under k.
func sum[T string | []byte](k fpKey, m T) uint64 {
	v0 := k.k0 ^ 0x736f6d6570736575
	v1 := k.k1 ^ 0x646f72616e646f6d
	v2 := k.k0 ^ 0x6c7967656e657261
	v3 := k.k1 ^ 0x7465646279746573
	n := len(m)
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	for len(m) >= 8 {
		w := uint64(m[0]) | uint64(m[1])<<8 | uint64(m[2])<<16 | uint64(m[3])<<24 |
			uint64(m[4])<<32 | uint64(m[5])<<40 | uint64(m[6])<<48 | uint64(m[7])<<56
		v3 ^= w
		round()
		round()
		v0 ^= w
		m = m[8:]
	}
	w := uint64(n) << 56
	for i := len(m) - 1; i >= 0; i-- {
		w |= uint64(m[i]) << (8 * i)
	}
	v3 ^= w
	round()
	round()
	v0 ^= w
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}

// fpBytes is the key of fingerprint fp in bucketURLs.
func fpBytes(fp uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), fp) }
