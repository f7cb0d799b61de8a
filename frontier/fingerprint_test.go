package frontier

import "testing"

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
