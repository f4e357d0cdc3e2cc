# The epoch order rule of docs/data.md "Reading order", written from the doc in Python: the values
# pinned by tests/data/epoch_order_test.cpp (EpochOrder.TheDocumentedRuleIsPinned). Run: python3 epoch_order_ref.py
M=(1<<64)-1
def mix64(x):
    x=(x+0x9E3779B97F4A7C15)&M
    x=((x^(x>>30))*0xBF58476D1CE4E5B9)&M
    x=((x^(x>>27))*0x94D049BB133111EB)&M
    return x^(x>>31)
SALT=0x45504F43484F5244
def permute(seed,epoch,pos,n):
    if n==1: return 0
    half=1
    while half<31 and (1<<(2*half))<n: half+=1
    mask=(1<<half)-1
    key=mix64(mix64(seed^SALT)^epoch)
    keys=[mix64((key+r)&M) for r in range(6)]
    x=pos
    while True:
        L,R=x>>half,x&mask
        for k in keys:
            L,R=R,L^(mix64(R^k)&mask)
        x=(L<<half)|R
        if x<n: return x
for a in [(1337,0,0,1000),(1337,0,1,1000),(1337,3,999,1000),(42,2,7,10)]:
    print(a,permute(*a))
assert sorted(permute(5,1,p,777) for p in range(777))==list(range(777))
