package learnedfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// learnedStore is a Source over a map, in host order as a store gives them.
type learnedStore [][2]string

func (s learnedStore) HostStates(fn func(host string, state []byte) error) error {
	for _, hs := range s {
		if err := fn(hs[0], []byte(hs[1])); err != nil {
			return err
		}
	}
	return nil
}

// TestLearnedRoundTrip: what Write writes Read reads back, filtered by host, the
// last store winning for a host in two.
func TestLearnedRoundTrip(t *testing.T) {
	a := learnedStore{{"a.test", `{"AIMD":{"Rate":20}}`}, {"b.test:8080", `{"AIMD":{"Rate":5}}`}, {"skip.test", `{}`}}
	b := learnedStore{{"a.test", `{"AIMD":{"Rate":30}}`}}
	var buf bytes.Buffer
	n, err := Write(&buf, func(h string) bool { return h != "skip.test" }, a, b)
	if err != nil || n != 3 {
		t.Fatalf("Write = %d, %v; want 3 lines", n, err)
	}
	path := filepath.Join(t.TempDir(), "learned.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a.test": `{"AIMD":{"Rate":30}}`, "b.test:8080": `{"AIMD":{"Rate":5}}`}
	if len(got) != len(want) {
		t.Fatalf("read %d hosts, want %d: %q", len(got), len(want), got)
	}
	for h, s := range want {
		if string(got[h]) != s {
			t.Errorf("%s: %s, want %s", h, got[h], s)
		}
	}
	if _, err := Write(&buf, func(string) bool { return true }, learnedStore{{"x", "not json"}}); err == nil {
		t.Error("Write wrote a state that is not a JSON object")
	}
}

// TestReadLearnedRejects: each malformed line is refused with the file and its line number.
func TestReadLearnedRejects(t *testing.T) {
	good := `{"host":"a.test","state":{}}` + "\n"
	for _, tc := range []struct{ name, line, want string }{
		{"not JSON", "{oops\n", "not a learned-politeness file"},
		{"unknown field", `{"host":"a","state":{},"x":1}` + "\n", "unknown field"},
		{"no host", `{"state":{}}` + "\n", "host key of 1 to 1024 bytes"},
		{"long host", fmt.Sprintf(`{"host":%q,"state":{}}`, strings.Repeat("h", 1025)) + "\n", "host key of 1 to 1024 bytes"},
		{"state not an object", `{"host":"a","state":[1]}` + "\n", "JSON object"},
		{"line too long", `{"host":"a","state":{"s":"` + strings.Repeat("x", 70<<10) + `"}}` + "\n", "a line over 64 KiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "learned.jsonl")
			os.WriteFile(path, []byte(good+tc.line), 0o644)
			_, err := Read(path)
			if err == nil || !strings.Contains(err.Error(), path+":2:") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read: %v; want an error naming %s:2 and %q", err, path, tc.want)
			}
			if err != nil && !errors.Is(err, ErrNotLearned) {
				t.Errorf("%v does not wrap ErrNotLearned", err)
			}
		})
	}
}

// FuzzRead: any file content is read or refused with an error, never a panic, and every state
// read is a JSON object of a host key of bounded length.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"host":"a.test","state":{"AIMD":{"Rate":20}}}` + "\n"))
	f.Add([]byte(`{"host":"","state":{}}`))
	f.Add([]byte("\n\n{oops"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "learned.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		states, err := Read(path)
		if err != nil {
			return
		}
		for h, s := range states {
			if h == "" || len(h) > maxHostKey || len(s) == 0 || s[0] != '{' {
				t.Fatalf("read host %q state %q", h, s)
			}
		}
	})
}
