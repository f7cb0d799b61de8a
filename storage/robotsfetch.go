package storage

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"
)

// robotsFetch is a robots.txt response as kept in bucketRobotsFetches: the page metadata and
// the body (at most robots.MaxSize+1 bytes, so kept inline rather than in bucketBodies).
type robotsFetch struct {
	Page
	Body []byte `json:"body"`
}

// PutRobotsFetch keeps one robots.txt response as received (each redirect hop is its own
// response), for export; p.Seq is set to its place in the robots.txt fetch order, a sequence of
// its own, apart from the pages'. Robots.txt fetches are not pages: Pages, PageMeta and
// Stats never see them. PutRobots, not this, holds the rules the crawl uses.
func (db *DB) PutRobotsFetch(p *Page) error {
	// Batch: concurrent robots.txt fetches share one commit. A failed batch is rolled back,
	// sequence included, before fn runs again, so running it twice keeps one record.
	err := db.Batch(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketRobotsFetches)
		b.FillPercent = appendFill // keyed by sequence, as the pages
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		p.Seq = seq
		v, err := json.Marshal(robotsFetch{Page: *p, Body: p.Body})
		if err != nil {
			return err
		}
		return b.Put(binary.BigEndian.AppendUint64(nil, seq), v)
	})
	if err != nil {
		return fmt.Errorf("storage: put robots.txt fetch %s in %s: %w", p.URL, db.path, err)
	}
	return nil
}

// RobotsFetches calls fn for every robots.txt response kept by PutRobotsFetch, in the order
// they were kept, body included, and stops at the first error fn returns, returning it. A store
// written before robots.txt fetches were kept has none.
func (db *DB) RobotsFetches(fn func(p *Page) error) error {
	return db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketRobotsFetches)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var r robotsFetch
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("storage: robots.txt fetch %x in %s: %w", k, db.path, err)
			}
			r.Page.Body = r.Body
			return fn(&r.Page)
		})
	})
}
