// Package aimd learns how fast one host may be crawled. Its one job: outcomes of finished
// requests (with their times) in, an allowed request rate and a concurrency window out. The
// crawler is never told a host's limit; it must finish as if it knew it, with almost no
// over-limit replies.
//
// There are only a few types: Controller (one per host), Config (policy, plain data), Outcome
// (what one request taught us), Stats and State (what it has learned, to show and to persist).
//
// A Controller is pure: no goroutines, no clock, no I/O. Every method that decides takes the
// time as an argument, so tests drive it with a fake clock. It is not safe for concurrent use;
// hostlimit holds one lock per host around it.
//
// # Signals
//
// Overload (429, 503) and Failure (timeouts, resets, 502, 504) are explicit congestion signals,
// Failure only in a cluster: at least 3 of the host's last 8 outcomes since the last decrease
// (the Failures before it were answered by it). An isolated Failure is its page's fault (an
// endpoint that always answers 502, a page too slow for the timeout), and a site with a few such
// pages must not be cut at each one. A host that fails a share of its requests at any rate (a
// flaky backend, one bad node behind a balancer) is not congested either: slowing down does not
// make those failures go away. Its background share is learned from the requests sent well
// under the rate its first cluster after slow start was cut at (where load failures stop, and
// its own do not), and once known, a cluster must also hold more Failures among the last 16
// outcomes than that share explains; the cuts made before it was known are undone if it
// explains them (failure.go). Bare refusals (Overload that paused nothing: a 503 or 429
// without Retry-After) have such a share too, learned the same way outside refusal runs, but
// used only once 64 outcomes put it at 5% or more: until then every refusal is a signal, as a
// limiter's are (its refusals stop well under the rate it first refused at, so they teach no
// share). A proxy answering 5% of requests 503 at random held an unlimited host under 1.5
// req/s; 9 of 12 simulated seeds now ride it at full speed (Controller.overloadNeed). A bucket
// with a big burst is first refused at several times its limit, so a refusal with 5 or more
// of the last 16 refused (a limiter's excess, not a share) lowers the rate the share is
// learned under to what the host accepted (failureLog.excess): without that, a 10 req/s
// bucket of 20 tokens taught a 14% share at 16–21 req/s and was then sent 29 req/s. A run
// of Failures from a host that succeeded within the last minute backs off three halvings at most
// (a crawl's last URLs can all be such pages); after a minute without a success it is an outage
// and the halvings go on.
// Latency is the implicit one: when more of the recent successes are slow than the host's own
// latency distribution explains, and the slow ones were sent while another of our requests was
// in flight, our concurrency is queueing at the host. The host's distribution is its
// reference: the latencies of requests sent alone (nothing else of ours in flight, which
// hostlimit tells exactly through Outcome.InFlight). "Slow" is LatencyFactor × the reference's
// median or p90 (and LatencyMinExcess more); "more than explains" is a binomial count refZ
// standard deviations above the share the host itself puts there, that share bounded from the
// reference with its sampling error. A worker pool with a fixed service time is tight, so a few
// queued requests are a signal; a real site whose pages take 100 ms and sometimes 400 ms is
// not congested by being itself. A latency decrease that neither ends the slow share nor makes
// most requests faster than before is undone, and what was seen joins the reference (the
// reference was too small or unlucky). A host with no reference yet (slower than the initial
// sending interval from the start) has no latency signal. Neutral outcomes move nothing.
//
// Why not the p95 against a low quantile times a factor (what this package did first, and the
// usual advice): on the simulated web with log-normal service times (σ = 0.5, so p95 ≈ 4 × p10
// with no load at all) that rule read the spread as congestion and shrank the window to one,
// 13% of an unlimited host's throughput and 27% of a 20/s limit (TestSimSpreadLatency).
//
// At most one decrease happens per congestion epoch, as in TCP: a signal about a request sent
// before the last decrease belongs to the epoch that decrease already answered.
//
// # Rate: measured decrease, linear return, slow probe
//
// A server-side token bucket of rate L and burst b answers requests beyond L with an immediate
// 429. It passes at most L·T + b requests in any T seconds, and about that many in the T
// seconds since it was last full (a Retry-After pause refills it; sending below L keeps it
// full). So a refusal measures L as the largest (successes sent since t0 − 1.5) ÷ (ts − t0)
// over the epoch's sends t0, with spans of at least 0.8 s: 1.5 stands for the unknown burst.
// A host that refuses a request sent sooner after the previous success than any success
// ever came behaves like a one-token bucket (nginx's limit_req without burst is one): such a
// bucket refuses as soon as the rate passes L, so the shortest accepted gap measures L
// exactly, where counting would allow for a burst it does not have and measure ~20% low. The
// rate and the plateau become Beta (0.97) × the measurement: the controller holds just under
// the limit instead of riding TCP's 75% sawtooth, and probes above it with a slow cubic curve,
// so it still finds a limit that rises. The probe is slow because every over-limit reply costs
// a Retry-After pause, and slower still (up to 4×) while refusals keep coming at the same rate.
// Its time is also at least 20 × the pause the last refusal cost (up to an hour): a host that
// answers "Retry-After: 60" loses a minute to each probe that finds its limit where it was,
// and probing it every minute or two cost a third of the crawl.
// A level that held for a while and is then refused is measured the same way: most often it
// was a little above L and the bucket's burst hid that, and the long epoch measures L well.
//
// A refusal also feeds the bucket fit (bucketfit.go), once the requests sent before it have
// come back: for each whole bucket size b (1–32, then up to 128) the range of rates that
// explain every answer since the limit last changed, computed soundly. One refusal cannot
// tell a small bucket at a high rate from a big one at a low rate, but slow start's and the
// climb's cut the band differently, so by the second refusal one or two sizes usually remain
// and their rates span a few percent: the rate and plateau become 0.99 × the least of them (a
// one-token bucket also gives up twice the timing noise), and if that raised them the probe
// waits one probe time before it starts (it can only find that the limit rose); the
// 1.5-token allowance above no longer matters. The fit never sets the rate at slow start's
// refusal; while it is wide the rules above decide alone; a fit that lowers the rate must
// also bound the bucket's size (a fixed window counter looks like any big bucket at a low
// rate); a host that refuses the fitted rate twice is left to the other rules. In the
// simulation (go test ./aimd -run TestSimTokenBucket -v) a 100/s burst-5 host runs at 98.9%
// of its limit after the first 10 s instead of 95.0% without the fit.
//
// Slow start's refusal measures little (the rate doubled past the limit): the rate drops to
// Beta × the success rate of the last second (at least a quarter of the refused rate) and
// climbs linearly within ReturnTime (5 s) to just under the last accepted rate; the refusal
// that climb draws is the measurement. If the climb, and the search above it, come within
// reach of the refused rate and hold there unrefused, while slow start had not sustained
// that rate before it was refused (the host accepted under 3/4 of it over the last second),
// the refusal measured nothing: a one-token bucket refuses a request that reaches it close
// behind another, and jitter makes such pairs far under its limit. The search then goes on
// toward twice the refused rate, and again at each such hold (refused at 4 req/s with every
// later request accepted, the rate was 3.3 req/s 30 s later; now 8.6). A refusal that ends an epoch too short to measure (the
// last cut was not enough, or the limit fell) halves the rate, as TCP does. A plateau left
// more than 1.25× below the rate of a refusal that measured nothing (slow start's, a
// halving's) is raised by binary search, one step per ReturnTime and 50 successes, so an
// over-cautious cut costs seconds, not minutes.
//
// What a refusal costs decides how soon the next may be risked. A 429 or 503 with Retry-After
// silences the whole host for at least a second (Outcome.Pause); one without (nginx's
// limit_req answers a bare 503, most proxies a bare 429) costs one retry. After a refusal of
// the second kind the return and the search steps take QuickReturnTime (2 s) and 20 successes
// instead: behind a real nginx (go run ./internal/limiterbench) that took the makespan of the
// four refusing sites' 15–20-second crawls from 1.20x–1.29x of the ideal to 1.10x–1.19x, for
// one more refusal on one of them (3 instead of 2).
//
// A refusal run (refusals with nothing accepted between them) is a host refusing whatever is
// sent: HAProxy's stick-table rate limit, a sliding window that counts refused requests too,
// once a burst has spent its quota; a fixed window without Retry-After; an outage. Each
// refusal of the run halves the rate, which spaces the run's requests out as an exponential
// backoff would, but measures nothing: at the first success the rate returns to what the host
// accepted since the epoch the run's first refusal ended began, Beta × the largest (successes
// sent from t0 to that success, less burstAllowance) ÷ the time since t0 (for a sliding
// window: the quota over the time it took to come back), or the rate the first refusal set if
// lower, and the gap to the first refused rate is searched as after any cut. A run that
// lasted less than 0.8 s (minSpan) is no window's block but a bucket's excess, two requests
// refused in a row at a rate well above its limit, and keeps its halvings: returning a big
// bucket's host to what it accepted counted slow start's burst (3x the limit), and the rate
// then came down 3% per refusal (go test ./aimd -run TestSimBigBurstBare -v: 33–98 refusals
// in 3,000 pages at bursts of 20–100 tokens, now 12–14). Before this rule
// a 100-requests-per-10-s sliding window (go test ./aimd -run TestSimSlidingWindow -v) took
// 29x its ideal makespan: the halvings had left the rate at 0.3/s, and the search climbs only
// one step per 20 successes.
//
// Three refinements keep a window limiter from pulling the controller into run after run.
// The search after a run aims no higher than twice the rate it measured, or a rate the host
// accepted before the run over at least half as long as the run lasted: a window lets its
// whole quota through at any speed, so slow start is refused at hundreds of req/s against a
// quota of 10 per second, and searching toward that stepped into the next block; a run whose
// first refusal a search step drew, or a measurement answered, is not searched again. A
// refusal sooner after a run ended than the longest run seen lasted (about the window's
// period) resumes that episode: the window had slid only a little, or the rate the run ended
// with is still too high. The next success ends it as it would a run, measured from where
// the episode began (not over its own backoff), and at least Beta under the rate it was
// refused at, so a slowly converging measurement is not refused again and again. And the
// successes are counted from the fit's log (2,048 requests): a long window's quota does not
// fit in the 128 samples. Simulated, 2,000 pages (go test ./aimd -run TestSimSlidingWindow
// -v, seeds 1–4): 100 per 10 s with 1-ms pages 3.2x–3.6x → 1.14x, 300 per 60 s 1.03x–1.28x →
// 1.02x (1.85% over-limit replies), 10 per 1 s about as before with fewer refusals; 100 per
// 10 s with 20-ms pages 1.04x–1.08x → 1.09x–1.12x (the one case that lost).
//
// That bound is a guess, and a ban proves it wrong: a ban that each request restarts (Apache's
// mod_evasive) lasts until the backoff leaves a gap as long as the ban, so the episode's
// measurement is a small part of the limit (a 5-s ban after a burst over 50 per second
// measures about 5 req/s). When the search has reached its bound and held just under it,
// unrefused, for longer than the run lasted (by then a window whose period is the run's length
// and whose quota is what the episode measured would have refused it), the bound doubles,
// toward the rate that drew the run. And a run's end returns the rate to no less than Beta ×
// what the host accepted before the run over at least as long as the run lasted: a window of
// about that period allows it, and after a second ban the episode's measurement is again
// mostly ban. Simulated (go test ./aimd -run TestSimBan -v, 3,000 pages against 50 per second
// with a 5-s ban, seeds 1–4): 6.0x–6.3x the ideal makespan with 1.7% refusals → 2.3x–2.5x
// with 0.67%–0.97%; the sliding and fixed windows within their seeds' spread of before
// (TestSimSlidingWindow, TestSimFixedWindow). Doubling the bound as soon as it was reached
// (tried in session 7) cost the 10-s windows refusals: a window's quota outlasts a hold
// shorter than its period.
//
// A run whose episode holds fewer than three successes measured nothing: the host refused from
// our first requests on, because a limit shared with someone else (another client, or another
// of our host names for one server) was spent. At its first success slow start begins again
// from the initial rate; the halvings would otherwise leave the rate at the floor for good
// (behind one nginx limit_req answering two of our names, 150 pages took 25 minutes).
//
// Slow start multiplies the rate (×2 per 125ms, and at most once per request at low rates)
// while it is actually used, until the first congestion signal.
//
// Known limits: the 1.5-token allowance over- or under-measures a host whose burst is far from
// it by (b − 1.5) ÷ span (a big burst is then found by a later refusal of the held level, over
// a long span); a one-token host with network jitter refuses some requests paced below L.
//
// # Window: Little's law
//
// Until latency first says otherwise, the window follows the rate with room to spare (twice
// the requests the rate keeps in flight at baseline latency), and grows by one per success
// that found it full in slow start, slowly after. On a latency signal it is set to accepted
// rate × baseline holding time (Little's law), or to the highest concurrency at send at which
// recent requests still had baseline latency if that is larger, and always at least one less
// than before: a host with W workers and service time S then runs about W requests at latency
// S. The rate is not cut on latency; the window bounds the queue. Probes above a window that
// latency keeps bringing back are spaced out further each time.
//
// Rate growth only counts time in which the rate was the binding limit (sends spaced as the
// rate allows, window not full), so a host held back by its window or by a lack of URLs does
// not inflate a rate nobody has tested.
//
// # Why written by hand
//
// Nothing off the shelf does this: golang.org/x/time/rate paces at a given rate but learns
// none, and TCP congestion control lives in the kernel and reasons in packets, not in HTTP
// replies. The design borrows from TCP (slow start, epochs, AIMD), CUBIC (return to the last
// good level, then probe), BIC (binary search toward the last refusal), Vegas/Little's law
// (latency as the signal when nothing is refused) and BBR (the delivered rate as a
// measurement of the bottleneck).
package aimd
