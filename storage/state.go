package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// LoadHostState returns the bytes last saved for host by SaveHostStates (the host limiter's
// learned state, opaque to storage) and whether there were any.
func (db *DB) LoadHostState(host string) ([]byte, bool, error) {
	return db.get(bucketHostState, host, "host state")
}

// HostStates calls fn for every host's saved state, in host order, stopping at the first error
// fn returns (which HostStates returns). state is valid only during the call.
func (db *DB) HostStates(fn func(host string, state []byte) error) error {
	var stop errStop
	err := db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketHostState)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if err := fn(string(k), v); err != nil {
				stop = errStop{err}
				return stop
			}
			return nil
		})
	})
	if stop.err != nil {
		return stop.err
	}
	return err
}

// SaveHostStates stores the state of every host in states, in one transaction.
func (db *DB) SaveHostStates(states map[string][]byte) error {
	err := db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketHostState)
		for host, v := range states {
			if host == "" {
				return errors.New("empty host")
			}
			if err := b.Put([]byte(host), v); err != nil {
				return fmt.Errorf("host %s: %w", host, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: save host states in %s: %w", db.path, err)
	}
	return nil
}

// RobotsEntry is the cached robots.txt of one host, as the robots package fetched and judged it.
type RobotsEntry struct {
	Host      string    `json:"host"`       // host key
	FetchedAt time.Time `json:"fetched_at"` // when the last fetch attempt ended
	Status    int       `json:"status"`     // HTTP status of the last successful fetch (0 if none)
	Body      []byte    `json:"body"`       // body of that fetch
	Err       string    `json:"err"`        // error of the last attempt, "" if it succeeded
	Failures  int       `json:"failures"`   // consecutive failed attempts
	NextCheck time.Time `json:"next_check"` // when to fetch it again
	// HTTPOnly: the host was a seed given without a scheme whose https did not connect or
	// handshake, and answered over http; its robots.txt and pages are fetched over http.
	HTTPOnly bool `json:"http_only,omitempty"`
}

// Robots returns the cached robots.txt entry of host and whether there is one. An entry that
// does not decode (damaged) is no entry: the cache is only a cache, and robots.txt is fetched
// again.
func (db *DB) Robots(host string) (RobotsEntry, bool, error) {
	v, ok, err := db.get(bucketRobots, host, "robots")
	if !ok || err != nil {
		return RobotsEntry{}, ok, err
	}
	var e RobotsEntry
	if err := json.Unmarshal(v, &e); err != nil {
		return RobotsEntry{}, false, nil
	}
	return e, true, nil
}

// PutRobots stores e, replacing the entry of e.Host.
func (db *DB) PutRobots(e RobotsEntry) error {
	if e.Host == "" {
		return fmt.Errorf("storage: put robots in %s: empty host", db.path)
	}
	v, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("storage: put robots %s: %w", e.Host, err)
	}
	return db.put(bucketRobots, e.Host, v, "robots")
}

// Meta returns the crawl metadata stored under key (scope hosts, configuration…) and whether
// there is any.
func (db *DB) Meta(key string) ([]byte, bool, error) {
	return db.get(bucketMeta, key, "meta")
}

// PutMeta stores v under key, replacing any previous value.
func (db *DB) PutMeta(key string, v []byte) error {
	return db.put(bucketMeta, key, v, "meta")
}

// DeleteMeta deletes the crawl metadata stored under key, if any.
func (db *DB) DeleteMeta(key string) error {
	err := db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketMeta).Delete([]byte(key)) })
	if err != nil {
		return fmt.Errorf("storage: delete meta %q in %s: %w", key, db.path, err)
	}
	return nil
}

func (db *DB) get(bucket []byte, key, what string) ([]byte, bool, error) {
	var v []byte
	var ok bool
	err := db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(bucket); b != nil {
			if x := b.Get([]byte(key)); x != nil {
				v, ok = append([]byte{}, x...), true
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("storage: %s %q in %s: %w", what, key, db.path, err)
	}
	return v, ok, nil
}

func (db *DB) put(bucket []byte, key string, v []byte, what string) error {
	if key == "" {
		return fmt.Errorf("storage: put %s in %s: empty key", what, db.path)
	}
	// Batch: concurrent puts (a broad crawl stores a robots.txt per host) share one commit;
	// a Put is idempotent, as Batch requires.
	err := db.Batch(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucket).Put([]byte(key), v)
	})
	if err != nil {
		return fmt.Errorf("storage: put %s %q in %s: %w", what, key, db.path, err)
	}
	return nil
}
