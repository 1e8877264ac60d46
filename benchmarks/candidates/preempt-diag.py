"""Diagnose preemption on one cell: per p9 job with a long wait, what happened while it waited."""

import json
import sys
from pathlib import Path

import reconciler.core.preemptions as P
from reconciler.core.preemption import victims as V
from reconciler.sim import matrix as m

shape, seed, cfgname, jobs = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
log = []
orig = P.decide


def decide(setup, queue, admission, free, stopping, running, priorities, now):
    out = orig(setup, queue, admission, free, stopping, running, priorities, now)
    started = set(admission.start)
    f = free
    for c in queue:
        if c.name in started:
            f = f - c.request
    front = next((c for c in queue if c.name not in started), None)
    rules = setup.queues[""].rules
    rec = dict(now=now, n_start=len(started), free=f.cpu)
    if front is not None:
        w = admission.waiting.get(front.name)
        fp = priorities[front.name]
        cand = [r for r in running if V.may_preempt(rules, fp, r.priority)]
        ex = [r for r in cand if V.exempt(r, now, rules)]
        rec.update(
            front=front.name,
            fp=fp,
            fcpu=front.request.cpu,
            reason=str(w.reason) if w else None,
            instop=front.name in stopping,
            may_ask=V.may_ask(rules, fp),
            cand_cpu=sum(r.request.cpu for r in cand if not V.exempt(r, now, rules)),
            exempt_cpu=sum(r.request.cpu for r in ex),
            higher_cpu=sum(
                r.request.cpu for r in running if not V.may_preempt(rules, fp, r.priority)
            ),
            stopping_cpu=sum(s.freeing.cpu for s in stopping.values()),
            nstopping=len(stopping),
        )
        p9q = [c.name for c in queue if priorities[c.name] == 9 and c.name not in started]
        rec["p9q"] = p9q
    from reconciler.core.admission.waits import ReservedStart

    wf = admission.waiting.get(front.name) if front is not None else None
    rec["shadow"] = (
        (wf.note.at - now) if wf is not None and isinstance(wf.note, ReservedStart) else None
    )
    rec["dec"] = [
        (
            d.preemptor.name,
            d.preemptor.priority,
            [
                (
                    v.run.name,
                    v.run.priority,
                    v.run.request.cpu,
                    v.run.resumable,
                    now - v.run.started,
                )
                for v in d.victims
            ],
        )
        for d in out
    ]
    log.append(rec)
    return out


P.decide = decide
conf = next(c for c in m.CONFIGURATIONS if c.name == cfgname)
cell = m.Cell(shape, seed, conf, jobs, Path("/work/shared/traces/lublin_256.swf"))
r = m.run_cell(cell)
Path(
    f"/tmp/preempt/diag_{shape}_{seed}_{jobs}_{'ge7' if '7' in cfgname else 'any'}.json"
).write_text(json.dumps(dict(log=log, figures=r.figures.__dict__), default=str))
print(r.figures)
