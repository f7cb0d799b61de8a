package storage

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCreateIsAtomic: a new store appears complete under its name (a reader can open it at
// once), and what a create killed midway left behind is cleaned up by the next one.
func TestCreateIsAtomic(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, tempPrefix+"killed")
	if err := os.WriteFile(stale, []byte("half a store"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(stale, old, old)

	db, err := Open(dir, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary store not removed: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*"))
	if len(left) != 0 {
		t.Errorf("create left %v behind", left)
	}
	ro, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("a new store does not open read-only: %v", err)
	}
	ro.Close()
}
