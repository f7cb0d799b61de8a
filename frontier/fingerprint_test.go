package frontier

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"go.etcd.io/bbolt"
)

// TestSipHash checks sum against the reference vectors of SipHash-2-4 (Aumasson and Bernstein,
// "SipHash: a fast short-input PRF", test.c): key 00 01 … 0f, message 00 01 … n-1.
func TestSipHash(t *testing.T) {
	want := []uint64{
		0x726fdb47dd0e0e31, 0x74f839c593dc67fd, 0x0d6c8009d9a94f5a, 0x85676696d7fb7e2d,
		0xcf2794e0277187b7, 0x18765564cd99a68d, 0xcbc9466e58fee3ce, 0xab0200f58b01d137,
		0x93f5f5799a932462, 0x9e0082df0ba9e4b0, 0x7a5dbbc594ddb9f3, 0xf4b32f46226bada7,
		0x751e8fbc860ee5fb, 0x14ea5627c0843d90, 0xf723ca908e7af2ee, 0xa129ca6149be45e5,
		0x3f2acc7f57c29bdb,
	}
	var kb [16]byte
	for i := range kb {
		kb[i] = byte(i)
	}
	k, err := parseFPKey(kb[:])
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, len(want))
	for i := range msg {
		msg[i] = byte(i)
	}
	for n, w := range want {
		if got := sum(k, msg[:n]); got != w {
			t.Errorf("SipHash-2-4 of %d bytes = %#x, want %#x", n, got, w)
		}
		if got := sum(k, string(msg[:n])); got != w {
			t.Errorf("SipHash-2-4 of a %d-byte string = %#x, want %#x", n, got, w)
		}
	}
}

func BenchmarkFingerprint(b *testing.B) {
	k, _ := newFPKey()
	url := "http://host0123.example/section/126/page-1000000.html"
	b.SetBytes(int64(len(url)))
	for b.Loop() {
		sum(k, url)
	}
}

// TestFingerprintCollision makes two URLs collide, as two URLs with the same fingerprint would,
// by naming one's record by the other's fingerprint: the second is then taken as seen (not
// queued, in memory and on disk alike), State says it was never seen, and the record stays the
// first one's. Check reports the record that is not under its own fingerprint.
func TestFingerprintCollision(t *testing.T) {
	tf := newTestFrontier(t)
	tf.add("http://a/x")
	x, y := fpBytes(sum(tf.key, "http://a/x")), sum(tf.key, "http://a/y")
	var loc uint32 // of x's record in bucketRecords
	err := tf.db.Bolt().Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketRecords).ForEach(func(k, v []byte) error {
			if bytes.Equal(v[:8], x) {
				loc = uint32(binary.BigEndian.Uint64(k))
				return tx.Bucket(bucketRecords).Put(bytes.Clone(k), recordValue(fpBytes(y), bytes.Clone(v[8:])))
			}
			return nil
		})
	})
	if err != nil || loc == 0 {
		t.Fatalf("no appended record of http://a/x (%v)", err)
	}
	tf.seen.claim(y) // as Open would load it
	tf.seen.placed([]fpLoc{{y, loc}})
	tf.seen.end([]uint64{y}, true)
	for _, reopen := range []bool{false, true} {
		if reopen {
			if err := tf.db.Close(); err != nil {
				t.Fatal(err)
			}
			tf.open()
		}
		if n := tf.add("http://a/y"); n != 0 {
			t.Errorf("a URL whose fingerprint is taken was queued (reopened %v)", reopen)
		}
		if _, ok, err := tf.State("http://a/y"); ok || err != nil {
			t.Errorf("State of the colliding URL: seen %v, %v", ok, err)
		}
		var urls []string
		if err := tf.Walk(func(r URLRecord) error { urls = append(urls, r.URL+" "+r.State); return nil }); err != nil || len(urls) != 1 || urls[0] != "http://a/x queued" {
			t.Errorf("Walk: %q, %v; want the first URL's record alone", urls, err)
		}
	}
	if err := tf.Check(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "whose fingerprint is another") {
		t.Errorf("Check: %v", err)
	}
	tf.db.Close()
	tf.db = nil // the store is inconsistent on purpose: no Check at cleanup
}
