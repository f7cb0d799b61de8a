package storage

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// TestBatchSharesAndIsolates: concurrent Batch calls share transactions and every one that
// succeeds is committed once; a function that fails gets its own error and takes no other down;
// a function that panics does so in its own caller, after the others committed.
func TestBatchSharesAndIsolates(t *testing.T) {
	db, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Bolt().MaxBatchSize, db.Bolt().MaxBatchDelay = 8, 50*time.Millisecond
	bucket := []byte("batch-test")
	if err := db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket(bucket); return err }); err != nil {
		t.Fatal(err)
	}

	const n = 40
	txs := make(map[*bbolt.Tx]int) // functions run per transaction
	var mu sync.Mutex
	errBad := errors.New("bad input")
	var wg sync.WaitGroup
	errs := make([]error, n)
	panicked := make([]any, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { panicked[i] = recover() }()
			errs[i] = db.Batch(func(tx *bbolt.Tx) error {
				mu.Lock()
				txs[tx]++
				mu.Unlock()
				switch i % 10 {
				case 3:
					return errBad
				case 7:
					panic(fmt.Sprintf("function %d", i))
				}
				return tx.Bucket(bucket).Put([]byte(fmt.Sprint(i)), []byte("v"))
			})
		}()
	}
	wg.Wait()

	for i := range n {
		switch i % 10 {
		case 3:
			if !errors.Is(errs[i], errBad) {
				t.Errorf("function %d: %v, want its own error", i, errs[i])
			}
		case 7:
			if panicked[i] != fmt.Sprintf("function %d", i) {
				t.Errorf("function %d: panic %v in its caller, want its own", i, panicked[i])
			}
		default:
			if errs[i] != nil || panicked[i] != nil {
				t.Errorf("function %d: %v, %v; want it committed", i, errs[i], panicked[i])
			}
		}
	}
	var keys int
	if err := db.View(func(tx *bbolt.Tx) error { keys = tx.Bucket(bucket).Stats().KeyN; return nil }); err != nil {
		t.Fatal(err)
	}
	if want := n - n/10*2; keys != want {
		t.Errorf("%d keys committed, want %d", keys, want)
	}
	shared := 0
	for _, k := range txs {
		if k > 1 {
			shared++
		}
	}
	if shared == 0 {
		t.Errorf("no transaction ran more than one function: %v", txs)
	}
}
