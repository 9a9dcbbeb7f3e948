#!/usr/bin/python3
"""Stateful fuzzing of the running sluice daemon, from both sides.

Run inside a network namespace of its own (make fuzz-daemon does):

  unshare --net --mount -- /usr/bin/python3 tests/fuzz/daemon/run.py --seconds 60
  unshare --net --mount -- /usr/bin/python3 tests/fuzz/daemon/run.py --replay FILE

It refuses to send anything before it has checked that the namespace is
fresh, with lo as its only link and no route out. See tests/fuzz/README.md."""

import argparse
import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fuzzd import codec, gen, gen_inspect, mutate, net, rules, sess  # noqa: E402
from fuzzd.harness import Runner, case_id, load_cases  # noqa: E402

REPO = HERE.parents[2]


def options(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=60, help="how long to fuzz (default 60)")
    p.add_argument("--replay", nargs="+", metavar="FILE", help="run these cases (or crash files) and stop")
    p.add_argument("--repeat", type=int, default=1, help="with --replay: run each this many times")
    p.add_argument("--corpus", action="append", metavar="DIR",
                   help="corpus directories to replay first (default: tests/fuzz/daemon/corpus and "
                        "build/fuzz-daemon/corpus)")
    p.add_argument("--out-corpus", default=str(REPO / "build/fuzz-daemon/corpus"), metavar="DIR",
                   help="where new interesting cases go (default build/fuzz-daemon/corpus)")
    p.add_argument("--crashes", default=str(REPO / "build/fuzz-daemon/crashes"), metavar="DIR")
    p.add_argument("--workdir", default=str(REPO / "build/fuzz-daemon/run"), metavar="DIR")
    p.add_argument("--binary", default=os.environ.get("FUZZ_DAEMON_BIN", str(REPO / "build/fuzz-daemon/sluice")),
                   help="sluice to run (default build/fuzz-daemon/sluice, the coverage build; "
                        "build/san/sluice works too, with behaviour signatures instead of coverage)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--timeout-ms", type=int, default=300,
                   help="header_ms, connect_ms, idle_ms and dns timeout_ms (default 300)")
    p.add_argument("--canary-s", type=float, default=5.0, help="a canary's deadline (default 5 s)")
    p.add_argument("--canary-every", type=float, default=0.15, help="seconds between concurrent canaries")
    p.add_argument("--close-grace-s", type=float, default=4.0,
                   help="how long after its client ended an allow line may wait for its close line")
    p.add_argument("--restart-every", type=int, default=300,
                   help="cases per sluice process (each stop checks exit status and leaks)")
    p.add_argument("--keep-going", action="store_true", help="go on after a failure (each is still written)")
    p.add_argument("--seed", type=int, help="seed for the run's own choices")
    p.add_argument("--replay-share", type=float, default=None,
                   help="share of --seconds the corpus replay may take (default: all of it for runs of "
                        "5 minutes or more, half for shorter ones)")
    p.add_argument("--merge", metavar="DIR", help="replay the corpus and write the cases that add edges to DIR")
    p.add_argument("--no-coverage", action="store_true", help="do not map the coverage counters")
    p.add_argument("--inspect", choices=["auto", "on", "off"], default="auto",
                   help="give the gate request rules, [tls] and a credential, and drive inspected tunnels "
                        "(auto, the default: unless the binary does not know [tls])")
    p.add_argument("--ignore", default=os.environ.get("FUZZ_DAEMON_IGNORE", ""), metavar="KIND,...",
                   help="drop violations of these kinds (exploring past a known finding; make test sets none)")
    p.add_argument("--focus", choices=["pinned", "sessions"], default=os.environ.get("FUZZ_DAEMON_FOCUS") or None,
                   help="pinned: most fresh cases are pinned-artifact scenarios, and mutations start from cases "
                        "that ask for pinned paths half the time; sessions: the same for session cases "
                        "(exploring a feature; make test sets none)")
    p.add_argument("--pin-hold-kib", type=int, default=None, metavar="N",
                   help="[tls] pin_hold_kib for the gate, and the model's (default 8192, above every body here: "
                        "all are held; 64 or 0 let the bigger ones stream with their end held back, as SPEC says)")
    p.add_argument("--self-test", action="store_true",
                   help="break each property on purpose and require the checks to report it")
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(argv)


def _inspected(case):
    return any(isinstance(cl.get("tls"), dict) for cl in case.get("clients", [])) or \
        any(rules.zone_of(n.replace(gen.NONCE, "x")) for n in case.get("dns", {}))


def _pinned(case):
    """Whether a case asks for a pinned path (rules.PINS)."""
    return "/pin/" in json.dumps(case.get("clients", []))


def _sessions(case):
    return isinstance(case.get("sessions"), dict)


# A fresh case is a session scenario this often (sess.py), so that make
# fuzz-daemon's minute sees some; --focus sessions makes it most of them.
SESSION_SHARE = 0.2


def replay_order(cases):
    """Regressions first (crash-*, regress-*), then the rest by size,
    inspected and other cases taking turns: a short run (the replay stops
    at its share of the time) still replays some of each."""
    cases = sorted(cases, key=lambda c: len(json.dumps(c)))
    regress = [c for c in cases if Path(c.get("_file", "")).name.startswith(("crash-", "regress-"))]
    rest = [c for c in cases if not any(c is r for r in regress)]
    turns = [[c for c in rest if not _inspected(c)], [c for c in rest if _inspected(c)]]
    out = list(regress)
    while turns[0] or turns[1]:
        for t in turns:
            if t:
                out.append(t.pop(0))
    return out


async def fuzz(o):
    r = Runner(o)
    await r.setup()
    ok = True
    try:
        ok = await _fuzz(r, o)
    finally:
        ok = await r.close() and ok
        r.status("done")
        summary(r)
    return ok and not r.failures


async def maybe_restart(r, force=False):
    if force or not r.daemon.alive() or len(r.cases_since_start) >= r.o.restart_every:
        if r.daemon.alive():
            await r.stop_daemon()
        else:
            r.daemon.kill()
        await r.start_daemon()


def stuck(r, case):
    """The harness, not sluice, failed to finish a case: say where it waits."""
    print(f"fuzz-daemon: harness stuck on case {case['id']} for {CASE_LIMIT_S}s; its tasks:", flush=True)
    for t in asyncio.all_tasks():
        for f in t.get_stack(limit=3):
            print(f"  {t.get_name()}: {f.f_code.co_filename.rsplit('/', 1)[-1]}:{f.f_lineno} {f.f_code.co_name}")
    r.stats["harness_stuck"] += 1


CASE_LIMIT_S = 90


async def run_one(r, case, out_dir=None):
    try:
        violations, new_bits, new_sig = await asyncio.wait_for(r.run_case(case), CASE_LIMIT_S)
    except asyncio.TimeoutError:
        stuck(r, case)
        await maybe_restart(r, force=True)
        return False
    failed = r.handle(case, violations)
    kept = False
    if not failed:
        kept = r.keep(case, new_bits, new_sig, out_dir)
    if r.o.verbose:
        print(f"  case {case['id']} {case.get('origin', '')[:60]} edges+{new_bits} sig+{len(new_sig)}"
              f"{' kept' if kept else ''}{' FAILED' if failed else ''}", flush=True)
    if failed or not r.daemon.alive():
        await maybe_restart(r, force=not r.daemon.alive())
    return failed


async def _fuzz(r, o):
    deadline = r.t0 + o.seconds
    out_dir = Path(o.out_corpus) if o.out_corpus else None
    dirs = o.corpus or [str(HERE / "corpus"), str(REPO / "build/fuzz-daemon/corpus")]
    seen = set()
    corpus = []
    for d in dirs:
        if Path(d).is_dir():
            for c in load_cases(d):
                if c["id"] not in seen:
                    seen.add(c["id"])
                    corpus.append(c)
    share = o.replay_share if o.replay_share is not None else (1.0 if o.seconds >= 300 else 0.5)
    replay_end = r.t0 + o.seconds * share
    last = time.monotonic()
    replayed = 0
    for case in replay_order(corpus):
        if time.monotonic() > replay_end:
            break
        failed = await run_one(r, case, None)
        replayed += 1
        if not failed:
            # A replayed case stays in the corpus even if the edges it adds
            # were found first by another one.
            if case not in r.corpus:
                r.corpus.append(case)
        elif not o.keep_going:
            return False
        await maybe_restart(r)
        if time.monotonic() - last > 10:
            r.status("replay")
            last = time.monotonic()
    print(f"fuzz-daemon: replayed {replayed} of {len(corpus)} corpus cases", flush=True)

    rng = random.Random(o.seed if o.seed is not None else int.from_bytes(os.urandom(6), "big"))
    while time.monotonic() < deadline:
        seed = rng.getrandbits(48)
        pinned = [c for c in r.corpus if _pinned(c)] if o.focus == "pinned" else \
            [c for c in r.corpus if _sessions(c)] if o.focus == "sessions" else []
        if o.focus == "pinned" and rng.random() < 0.3:
            case = gen_inspect.scenario(random.Random(seed), gen.Ctx(random.Random(seed)), seed, kind="pinned")
        elif o.focus == "sessions" and rng.random() < 0.3:
            case = sess.scenario(seed)
        elif not r.corpus or rng.random() < 0.25:
            case = sess.scenario(seed) if rng.random() < SESSION_SHARE else \
                gen.scenario_case(seed) if rng.random() < 0.5 else gen.case(seed)
        else:
            parent = rng.choice(pinned if pinned and rng.random() < 0.5 else r.corpus)
            case = mutate.mutate(parent, r.corpus, seed)
        case["id"] = case_id(case)
        failed = await run_one(r, case, out_dir)
        if failed and not o.keep_going:
            return False
        await maybe_restart(r)
        if time.monotonic() - last > 10:
            r.status("fuzz")
            last = time.monotonic()
    return True


async def replay(o):
    r = Runner(o)
    await r.setup()
    failed = False
    try:
        for f in o.replay:
            for case in load_cases(f):
                for i in range(o.repeat):
                    case = dict(case)
                    v, bits, sig = await r.run_case(case)
                    kinds = sorted({x.kind for x in v})
                    print(f"fuzz-daemon: replay {case['id']} ({Path(f).name}) run {i + 1}: "
                          f"{'FAILED ' + ', '.join(kinds) if v else 'ok'}", flush=True)
                    for x in v:
                        print(f"  {x.kind}: {x.detail[:4000]}", flush=True)
                    if o.verbose:
                        show(r)
                    if v:
                        failed = True
                        r.handle(case, v)
                    await maybe_restart(r, force=not r.daemon.alive())
    finally:
        ok = await r.close()
        for f in r.failures:
            if f.case is None:
                print(f"  {f.kind}: {f.detail[:4000]}")
    return not failed and ok


def show(r):
    """What a replayed case did: each client's bytes back, its log lines,
    what each origin connection got."""
    results, lines, conns = r.last
    for cr in results:
        print(f"  client :{cr.local_port} {cr.outcome}: got {bytes(cr.received[:600])!r}")
        mine = {l.get("id") for l in lines if str(l.get("client", "")).endswith(f":{cr.local_port}")}
        for l in lines:
            if l.get("id") in mine:
                print(f"    log: {json.dumps({k: v for k, v in l.items() if k not in ('chain', 'ts', 'rule')})[:400]}")
    for c in conns:
        print(f"  origin {c.local}:{c.port} eof={c.eof} got {bytes(c.data[:400])!r}")


async def merge(o):
    """Keep the smallest set of corpus cases, taken in size order, that
    reaches every edge the whole corpus reaches."""
    o.keep_going = True
    r = Runner(o)
    await r.setup()
    out = Path(o.merge)
    out.mkdir(parents=True, exist_ok=True)
    dirs = o.corpus or [str(HERE / "corpus"), str(REPO / "build/fuzz-daemon/corpus")]
    cases = []
    for d in dirs:
        if Path(d).is_dir():
            cases += load_cases(d)
    kept = 0
    try:
        for case in replay_order({c["id"]: c for c in cases}.values()):
            name = Path(case["_file"]).name
            v, bits, sig = await r.run_case(case)
            keep_it = name.startswith(("crash-", "regress-")) or (bits and not v)
            if keep_it and name.startswith(("crash-", "regress-")):
                (out / name).write_text(Path(case["_file"]).read_text())   # with what it found
                kept += 1
            elif keep_it:
                body = {k: val for k, val in case.items() if not k.startswith("_")}
                (out / f"{case['id']}.json").write_text(codec.dumps(body))
                kept += 1
            await maybe_restart(r)
    finally:
        await r.close()
    print(f"fuzz-daemon: merge kept {kept} of {len(cases)} cases in {out}")
    return True


def summary(r):
    s = r.stats
    el = time.monotonic() - r.t0
    print(f"fuzz-daemon: {s['cases']} cases in {el:.0f}s ({s['cases'] / max(el, 1e-9):.2f}/s), "
          f"{s['canaries']} canaries ({s['canary_excused_lag']} excused for harness lag), "
          f"corpus {len(r.corpus)}, kept {s['kept']} new, edges {r.edges()} of {r.nguards}, "
          f"{len(r.sigs)} behaviour signatures, {len(r.failures)} distinct failures "
          f"({s['failures']} in all)")
    if s["sess_cases"]:
        print(f"fuzz-daemon: sessions: {s['sess_cases']} cases, {s['sess_reloads']} reloads; requests judged: "
              + ", ".join(f"{k[5:]} {v}" for k, v in sorted(s.items()) if k.startswith("sess_paired_")))
    pins = sorted((k[4:], v) for k, v in s.items() if k.startswith("pin_"))
    if pins:
        print("fuzz-daemon: pinned paths: " + ", ".join(f"{k} {v}" for k, v in pins))
    kinds = sorted(k[len("n_canary_"):] for k in s if k.startswith("n_canary_"))
    print("fuzz-daemon: canaries' mean time: " + ", ".join(
        f"{k} {s['t_canary_' + k + '_ms'] / max(1, s['n_canary_' + k]):.0f} ms" for k in kinds))
    for f in r.failures:
        frames = f.extra.get("frames")
        print(f"  {f.kind}" + (f": {' < '.join(frames)}" if frames else f": {f.detail.splitlines()[0][:200]}"))


def main(argv):
    o = options(argv)
    if o.pin_hold_kib is not None and not o.self_test:
        rules.PIN_HOLD_KIB = o.pin_hold_kib
    try:
        net.isolate()
    except Exception as e:   # not provably isolated: send nothing
        print(f"fuzz-daemon: refusing to run: {e}\n  run it as `unshare --net --mount -- "
              f"/usr/bin/python3 {sys.argv[0]} ...` (make fuzz-daemon)", file=sys.stderr)
        return 2
    if not Path(o.binary).exists():
        print(f"fuzz-daemon: no binary {o.binary} (make -f tests/fuzz/daemon/daemon.mk)", file=sys.stderr)
        return 2
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    if o.self_test:
        from fuzzd import selftest
        ok = asyncio.run(selftest.run(o))
    elif o.replay:
        ok = asyncio.run(replay(o))
    elif o.merge:
        ok = asyncio.run(merge(o))
    else:
        ok = asyncio.run(fuzz(o))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
