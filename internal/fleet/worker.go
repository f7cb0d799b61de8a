package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Worker is one process's place in a shared crawl: from Join until Leave its Frontier runs,
// holding its share of the crawl's partitions. The crawl loop uses Frontier (it keeps the
// crawler's frontier contract).
type Worker struct {
	Frontier *Frontier
	keeper   *Keeper
	stop     context.CancelFunc
	running  chan struct{}
}

// Join opens the shared crawl named crawl in rdb (creating it with opts if it does not exist)
// as worker id and starts its Frontier. Leave must be called once the crawl loop is done.
func Join(ctx context.Context, rdb redis.UniversalClient, crawl, id string, opts *Options, fopts FrontierOptions) (*Worker, error) {
	store, err := Open(ctx, rdb, crawl, id, opts)
	if err != nil {
		return nil, err
	}
	k := store.NewKeeper()
	runCtx, stop := context.WithCancel(context.Background())
	w := &Worker{Frontier: NewFrontier(k, fopts), keeper: k, stop: stop, running: make(chan struct{})}
	go func() { defer close(w.running); w.Frontier.Run(runCtx) }()
	return w, nil
}

// Leave stops the worker's Frontier and hands its partitions back at once, so that other
// workers take its hosts without waiting for its leases to run out. If the hand-back fails,
// the partitions move when their leases run out; the error says why.
func (w *Worker) Leave(ctx context.Context) error {
	w.stop()
	<-w.running
	return w.keeper.ReleaseAll(ctx)
}

// NewWorkerID names this process as a worker: host name, PID and a random suffix, so that a
// restarted worker with a reused PID is a new worker.
func NewWorkerID() string {
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", strings.ReplaceAll(host, " ", "_"), os.Getpid(), hex.EncodeToString(b[:]))
}
