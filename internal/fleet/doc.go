// Package fleet keeps a crawl's frontier in Redis (or Valkey) so that several worker
// processes, on several machines, share one crawl while each host is crawled by one worker at
// a time.
//
// Host keys hash into a fixed number of partitions (PartitionOf). A worker holds one expiring
// lease, its heartbeat (renewed by Keeper.Tick every sixth of the TTL), and owns partitions
// under it: a partition's owner key holds EPOCH:WORKER with no expiry, the epoch drawn at each
// Acquire, and another worker takes the partition only once the owner's lease has ended. Every
// script that writes as the owner checks the owner key still holds the ownership's token, so a
// worker whose partition was taken over (stopped, partitioned away) changes nothing. On its
// own monotonic clock a worker stops using its partitions before its lease can have ended in
// Redis (Ownership.StateAt), so two owners of a host never overlap.
//
// Inside a partition: a FIFO queue and a delayed set (retries, scored by not-before) per host,
// a set of the hosts with work, an in-flight set scored by each URL's lease deadline, the
// seen-set (a log of each recorded URL's 8-byte fingerprint, which only the owner appends to:
// it holds the set in memory and checks URLs there, so Redis does no work per URL to record
// one), an inbox of URLs other workers sent the partition (the owner checks and records them,
// Drain), counters, an outbox of links found by its pages, and the hosts' learned politeness
// state.
// Every key of partition p carries the hash tag {p}, so every script touches one Redis Cluster
// slot.
//
// The crash contract matches package frontier's. A URL handed out by Take stays in the
// in-flight set until the one script of Complete marks it done (or delays it for a retry),
// queues its links of the same partition and puts the others in the outbox; a new owner returns
// every URL still in flight to its queue with one more attempt (Reclaim). Links reach other
// partitions through Forward, which appends them to their partitions' inboxes (idempotent
// thanks to the owners' seen-sets) before trimming the outbox, so a crash at any instant loses
// nothing. Page bodies never go to Redis: Frontier.Complete stores a page in the
// worker's own store (Join) before the script runs. Times that workers compare (in-flight
// deadlines, retry times) are Redis' TIME, never a worker's clock. A Redis node that restarts
// (or a replica promoted) may lose its last acknowledged writes: Frontier.Run reads every
// node's run_id each second and, on a new one, forgets the links it saw recorded and sends
// again those it left out since; Open refuses a Redis older than 6.2.
//
// A crawl created ByAddress (the crawler's --key-by-ip) puts a host in the partition of the
// address its name resolves to instead of its name's, recorded once per host for the whole
// crawl (place.go), so that one worker owns, and one gate paces, every name of a server.
//
// Keeper holds a worker's fair share of the partitions, ceil(partitions / live workers), from
// heartbeats on Redis' clock, so that partitions move when workers join, stop or die; its
// HostStates is the hostlimit.StateStore through which a host's learned politeness follows
// its partition to the next owner.
//
// Rendered pages' sub-requests to a host, whichever worker sends them, share its pace
// (Store.Pace, pace.go): one script reserves the fleet's next send slot to the host's gate, and
// a pause or refusal any worker meets (Store.PaceHold) holds them all; it holds no slot of any
// worker, so a worker that dies holds nothing.
//
// Target names the Redis, Valkey or Redis Cluster of a crawl (one node's URL finds a whole
// cluster; Target.Dial; rediss:// verifies each node, tls_ca=FILE trusts a private authority;
// ACL is what an ACL user needs). Nothing crosses a slot: reads of many partitions are pipelines split
// per node, and on a cluster with replicas Forward trims an outbox only once the replicas hold
// the links it delivered (WAIT).
//
// There are few types: Store (one worker's handle), Keeper (its share of partitions), Ownership
// (a held partition, with its LeaseState) and Lease (a URL in flight). ReadView reads the
// fleet's state for an operator (View: the summed counters and each worker, from the owner
// keys, the heartbeats and the reports workers send with Store.Report). docs/fleet.md explains the design and what remains.
package fleet
