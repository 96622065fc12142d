#!/usr/bin/env python3
# Generates the two example traces of a surge on a 2-CPU LAMP server whose
# gear bounced: heavy caching lowers the load, the step down sends the
# traffic back to PHP, the load returns. The model runs the default rules
# with no traffic guard, feeding each gear's PHP share back into the load.
import math, random, datetime
random.seed(11)
CPUS=2; DT=2; N=1200  # 40 minutes
start=datetime.datetime(2026,11,29,21,0,0,tzinfo=datetime.timezone.utc)
share={0:1.0,1:0.7,2:0.06}   # fraction of requests reaching PHP per gear
cost=0.012                   # runnable PHP tasks per request/s reaching PHP
ENTER={1:0.7,2:1.5}; STAY={1:0.5,2:1.0}
gear=0; runs={1:0,2:0}; stay_held={1:None,2:None}; dwell=0.0; ewma=None
load1=load5=load15=0.35
rows=[]
for i in range(N):
    t=i*DT
    surge = 300<=t<1500
    base = 520 if surge else 40
    rps = max(0.0, random.gauss(base, base*0.04))
    php = rps*share[gear]
    runnable = max(0, int(round(random.gauss(php*cost, math.sqrt(php*cost+0.05)))))
    # the kernel updates the load averages every 5 s
    if i==0 or (t//5)!=((t-DT)//5):
        for name,win in (("1",60),("5",300),("15",900)):
            a=math.exp(-5/win)
            v={"1":load1,"5":load5,"15":load15}[name]*a+runnable*(1-a)
            if name=="1": load1=v
            elif name=="5": load5=v
            else: load15=v
    ewma = runnable if ewma is None else ewma+(1-math.exp(-DT/10))*(runnable-ewma)
    lpc=max(load1,ewma)/CPUS
    mem=round(random.gauss(61-3*runnable/6,0.6),1)
    psi=round(min(100,max(0,random.gauss(runnable/CPUS*12,1.5))),2)
    backend=rps*(share[gear] if gear<2 else 0.08)
    rows.append((start+datetime.timedelta(seconds=t), load1,load5,load15,runnable,mem,psi,rps,backend))
    # the machine, without the guard
    for st in (1,2):
        runs[st]=runs[st]+1 if lpc>=ENTER[st] else 0
        if lpc>=STAY[st]: stay_held[st]=t
    moved=False
    for st in (2,1):
        if st>gear and runs[st]>=3:
            gear=st; dwell=t; moved=True; break
    if not moved and gear>0 and lpc<STAY[gear]:
        h=stay_held[gear]
        if (h is None or t-h>=120) and t-dwell>=60:
            gear-=1; dwell=t
def write(path, traffic):
    with open(path,"w") as f:
        cols="time,load1,load5,load15,runnable,cpus,mem_available_pct,psi_cpu,psi_mem"
        if traffic: cols+=",client_rps,backend_rps"
        f.write(cols+"\n")
        for (ts,l1,l5,l15,r,mem,psi,rps,be) in rows:
            line="%s,%.2f,%.2f,%.2f,%d,%d,%.1f,%.2f,0.00"%(ts.strftime("%Y-%m-%dT%H:%M:%SZ"),l1,l5,l15,r,CPUS,mem,psi)
            if traffic: line+=",%.0f,%.0f"%(rps,be)
            f.write(line+"\n")
import os
here=os.path.dirname(os.path.abspath(__file__))
write(os.path.join(here,"surge-bounce.csv"),False)
write(os.path.join(here,"surge-guarded.csv"),True)
