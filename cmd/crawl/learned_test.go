package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crawl-project/crawl/internal/simweb"
	"github.com/crawl-project/crawl/storage"
)

// TestExportLearnedCarriesPoliteness: crawl export --format learned writes each host's learned
// state, --host keeps some, and crawl run --learned-from FILE starts a new crawl of the site
// from it; a malformed file is refused naming its line.
func TestExportLearnedCarriesPoliteness(t *testing.T) {
	web, err := simweb.Start([]simweb.HostSpec{{Name: "a", Pages: 20}, {Name: "b", Pages: 5}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := crawlSite(t, web)
	file := filepath.Join(t.TempDir(), "learned.jsonl")
	var out, errb bytes.Buffer
	if code := exportCmd([]string{"--data", dir, "--format", "learned", "--out", file}, &out, &errb); code != exitOK {
		t.Fatalf("crawl export --format learned: exit %d\n%s", code, errb.String())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.Contains(errb.String(), "2 hosts") {
		t.Fatalf("want a line per host (2):\n%s\n%s", b, errb.String())
	}
	host := strings.TrimPrefix(web.Seeds()[0], "http://")
	host = strings.TrimSuffix(host, "/")
	out.Reset()
	if code := exportCmd([]string{"--data", dir, "--format", "learned", "--out", "-", "--host", host}, &out, &errb); code != exitOK || strings.Count(out.String(), "\n") != 1 || !strings.Contains(out.String(), host) {
		t.Fatalf("--host %s: exit %d, want its one line:\n%s", host, code, out.String())
	}

	fresh := filepath.Join(t.TempDir(), "fresh")
	errb.Reset()
	args := []string{"--seeds", writeSeeds(t, web.Seeds()), "--data", fresh, "--quiet", "--learned-from", file}
	if code := runCmd(args, &out, &errb); code != exitOK {
		t.Fatalf("crawl run --learned-from FILE: exit %d\n%s", code, errb.String())
	}
	db, err := storage.Open(fresh, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	db.HostStates(func(string, []byte) error { n++; return nil })
	db.Close()
	if n != 2 {
		t.Errorf("the new crawl saved %d host states, want 2", n)
	}

	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte(lines[0]+"\n{\"host\": 1}\n"), 0o644)
	errb.Reset()
	args = []string{"--seeds", writeSeeds(t, web.Seeds()), "--data", filepath.Join(t.TempDir(), "x"), "--quiet", "--learned-from", bad}
	if code := runCmd(args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), bad+":2:") {
		t.Errorf("--learned-from a malformed file: exit %d, want %d naming %s:2\n%s", code, exitUsage, bad, errb.String())
	}
}
