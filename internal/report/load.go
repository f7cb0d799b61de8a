package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/crawl-project/crawl/internal/crawler"
	"github.com/crawl-project/crawl/storage"
)

// LabelsMeta is the store metadata key (storage.DB.PutMeta) under which a JSON object may map
// host keys to display names; `crawl demo` names its simulated hosts this way.
const LabelsMeta = "host-labels"

// Data is everything a report shows.
type Data struct {
	Dir    string
	Status crawler.Status
	Series map[string][]storage.Sample // by host key, and storage.CrawlWide for the whole crawl
	Labels map[string]string           // host key -> display name; may be nil
}

// Load reads the report's data from the crawl in dir. It fails with ErrRunning while a crawl
// holds the store.
func Load(dir string) (*Data, error) {
	st, err := crawler.ReadStatus(dir)
	if err != nil {
		return nil, err
	}
	if st.Running {
		return nil, ErrRunning
	}
	db, err := storage.Open(dir, &storage.Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
	if errors.Is(err, storage.ErrLocked) {
		return nil, ErrRunning
	}
	if err != nil {
		return nil, err
	}
	defer db.Close()
	d := &Data{Dir: dir, Status: st, Series: map[string][]storage.Sample{}}
	keys, err := db.SampleSeries()
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if d.Series[k], err = db.Samples(k); err != nil {
			return nil, err
		}
	}
	if b, ok, err := db.Meta(LabelsMeta); err != nil {
		return nil, err
	} else if ok {
		if err := json.Unmarshal(b, &d.Labels); err != nil {
			return nil, fmt.Errorf("%s: bad %s record: %w", dir, LabelsMeta, err)
		}
	}
	return d, nil
}
