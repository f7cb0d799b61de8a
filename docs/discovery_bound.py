# The discovery bound of docs/aimd.md ("The discovery bound without headers"): python3 docs/discovery_bound.py
def climb(L, r0=2.0):
    t=0; n=0; r=r0
    while r < L:
        iv=max(0.125, 1/r); t+=iv; n+=max(1, r*iv); r*=2
    return t, n
def host(name, L, b, N, announce, m, drop=None, T=None):
    t, n = climb(L)
    P = 1.0 if announce else 1/L
    t += P
    n += min(b, P*L)
    if drop:
        after, L2 = drop
        # pages at m*L until the drop
        k = max(0, (after - t)) * m * L
        n += k; t = max(t, after)
        t += 1.0  # the drop's refusal pause (Retry-After 1 s)
        n += b
        t += (N - n) / (m * L2)
    else:
        t += (N - n) / (m * L)
    return t
rows = [("sec429",10,2,150,True,None),("date429",10,2,150,True,None),("bare429",8,1,100,False,None),
        ("svc503",10,3,150,True,None),("drop",20,2,200,True,(5.0,5.0)),("banhammer",10,2,150,True,None),
        ("burst",50,5,1000,True,None)]
for scale in (1,4):
  print("scale",scale)
  for name,L,b,N,ann,drop in rows:
    N2=N*scale
    ideal = N2/L if not drop else 5 + (N2-5*L)/drop[1]
    b0=host(name,L,b,N2,ann,1.0,drop); b3=host(name,L,b,N2,ann,0.97,drop)
    print(f"{name:10s} L={L:3} b={b} N={N2:5} ideal={ideal:6.2f}s  m=1: {b0:6.2f}s {ideal/b0:.3f}   m=0.97: {b3:6.2f}s {ideal/b3:.3f}")
