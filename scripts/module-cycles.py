#!/usr/bin/env python3
# The engine's top-level module dependency graph (non-test code: `crate::m`
# paths and `use crate::{...}` groups, comments dropped) and its cycles, as
# strongly connected components. Run from the repository root.
import os,re,sys
root='crates/engine/src'
mods=set()
for f in os.listdir(root):
    if f.endswith('.rs') and f!='lib.rs': mods.add(f[:-3])
    elif os.path.isdir(os.path.join(root,f)): mods.add(f)
edges={m:set() for m in mods}
def strip_tests(s):
    # drop #[cfg(test)] mod tests { ... } blocks crudely: cut at '#[cfg(test)]\nmod'
    i=s.find('#[cfg(test)]\nmod tests')
    return s if i<0 else s[:i]
for m in mods:
    p=os.path.join(root,m)
    files=[p+'.rs'] if os.path.isfile(p+'.rs') else [os.path.join(d,f) for d,_,fs in os.walk(p) for f in fs if f.endswith('.rs')]
    for f in files:
        if f.endswith('tests.rs') or '/tests/' in f: continue
        s=strip_tests(open(f).read())
        s=re.sub(r'//.*','',s)
        for t in re.findall(r'crate::([a-z_]+)',s):
            if t in mods and t!=m: edges[m].add(t)
        # use crate::{a, b::c}
        for grp in re.findall(r'crate::\{([^}]*)\}',s):
            for t in re.findall(r'(?:^|,)\s*([a-z_]+)',grp):
                if t in mods and t!=m: edges[m].add(t)
# SCCs
idx={};low={};st=[];on=set();res=[];c=[0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v]=low[v]=c[0];c[0]+=1;st.append(v);on.add(v)
    for w in edges[v]:
        if w not in idx: sc(w);low[v]=min(low[v],low[w])
        elif w in on: low[v]=min(low[v],idx[w])
    if low[v]==idx[v]:
        comp=[]
        while True:
            w=st.pop();on.discard(w);comp.append(w)
            if w==v:break
        res.append(comp)
for v in sorted(mods):
    if v not in idx: sc(v)
cyc=[x for x in res if len(x)>1]
print("modules:",len(mods),"cycles:",cyc if cyc else "none")
for comp in cyc:
    for a in sorted(comp):
        print(a,'->',sorted(edges[a]&set(comp)))
