# The discovery bound of docs/aimd.md ("The discovery bound without headers"):
#   python3 docs/discovery_bound.py
# Per host of simweb.PolitenessBench (token bucket of rate L, burst b, N pages; ideal N/L), what a
# client that is not told the limit must pay, and the web's share of the ideal (Σ ideal ÷ Σ time
# over the eight hosts with an ideal, as bench/crawlbench prints it).
#
# any:  refusals only. A bucket is learned from two refusals (one allows rates from 0.1 to 40/s
#       across sizes: TestOneRefusalCannotPin); each costs its pause P (Retry-After, whole
#       seconds; 1/L for a bare refusal) less the b tokens the pause refills. The drop host pays
#       that again at its new limit. The client starts at once at L and rides exactly at L.
# this: the same with this controller's start and ride: slow start from InitialRate r0 (2 req/s),
#       doubling per max(125 ms, one sending interval) (R3); the measuring climb through L after
#       the first pause (R4: from about 0.71 L, rising 0.18 L per second), which loses
#       0.29² / (2 × 0.18) ≈ 0.23 s of L; the ride at m = beta (0.97) of the refusal's measure
#       (R4), about 0.97 L.

CLIMB_LOSS = 0.29 ** 2 / (2 * 0.18)  # s of L lost below L in the measuring climb
M = 0.97


def slow_start(L, r0=2.0):
    """Time and pages until slow start reaches L."""
    t = n = 0.0
    r = r0
    while r < L:
        iv = max(0.125, 1 / r)
        t += iv
        n += max(1, r * iv)
        r *= 2
    return t, n


def pause_cost(L, b, announced):
    """Seconds of L one refusal costs: its pause less what the pause refills."""
    P = 1.0 if announced else 1 / L
    return max(P - min(b, P * L) / L, 0)


def crawl(L, b, N, announced, this, drop=None):
    """Time to fetch N pages (drop: (after s, new L)); the ideal counts L until after."""
    t, n = (0.0, 0.0)
    if this:
        t, n = slow_start(L)
    m = M if this else 1.0
    lost = 2 * pause_cost(L, b, announced) + (CLIMB_LOSS if this else 0)
    if drop is None:
        return t + lost + (N - n) / (m * L)
    after, L2 = drop
    # Before the drop: the two refusals, then the ride until the drop.
    t += lost
    n += max(after - t, 0) * m * L
    t = max(t, after)
    # After it: two refusals at the new limit, then the ride.
    t += 2 * pause_cost(L2, b, announced) + (CLIMB_LOSS if this else 0)
    return t + (N - n) / (m * L2)


def workers(N, W, S, this, r0=2.0):
    """A worker pool: no refusal; this controller's slow start to W/S."""
    cap = W / S
    t, n = slow_start(cap, r0) if this else (0.0, 0.0)
    return t + (N - n) / cap


ROWS = [  # name, L, b, N, announced (Retry-After), drop
    ("sec429", 10, 2, 150, True, None),
    ("date429", 10, 2, 150, True, None),
    ("bare429", 8, 1, 100, False, None),
    ("svc503", 10, 3, 150, True, None),
    ("drop", 20, 2, 200, True, (5.0, 5.0)),
    ("banhammer", 10, 2, 150, True, None),
    ("burst", 50, 5, 1000, True, None),
]

for scale in (1, 4):
    print(f"scale {scale}: host, ideal, then time and share of the ideal for any client and for this controller")
    tot = {"ideal": 0.0, "any": 0.0, "this": 0.0}
    for name, L, b, N, ann, drop in ROWS:
        N *= scale
        ideal = N / L if not drop else drop[0] + (N - drop[0] * L) / drop[1]
        a, c = crawl(L, b, N, ann, False, drop), crawl(L, b, N, ann, True, drop)
        tot["ideal"] += ideal
        tot["any"] += a
        tot["this"] += c
        print(f"  {name:10s} L={L:3} b={b} N={N:5}  ideal {ideal:6.2f}s  any {a:6.2f}s {ideal / a:.3f}  this {c:6.2f}s {ideal / c:.3f}")
    N = 300 * scale
    ideal = N * 0.05 / 4
    a, c = workers(N, 4, 0.05, False), workers(N, 4, 0.05, True)
    tot["ideal"] += ideal
    tot["any"] += a
    tot["this"] += c
    print(f"  {'workers':10s} 4 × 50 ms  N={N:5}  ideal {ideal:6.2f}s  any {a:6.2f}s {ideal / a:.3f}  this {c:6.2f}s {ideal / c:.3f}")
    print(f"  the web (8 hosts): any {tot['ideal'] / tot['any']:.3f}  this {tot['ideal'] / tot['this']:.3f}")
