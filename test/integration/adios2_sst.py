#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
"""ADIOS2 SST writer and reader over libfabric (the SST engine's RDMA data plane).

  adios2_sst.py writer [--steps N] [--mib M] [--interval S] [--stream NAME]
  adios2_sst.py reader [--steps N] [--mib M] [--stream NAME]

The writer puts N steps of one array of M MiB (uint64 elements, element i of step s is
s * 2**32 + i), --interval seconds apart. The reader gets every step and compares every
element with what the writer put. Both run in the same directory: SST's writer leaves its
contact file NAME.sst there and the reader waits for it (OpenTimeoutSecs).

The reader accounts for its time and CPU in three phases: wait (BeginStep: until the next
step is there), read (Get + EndStep: the RDMA reads of the step's data) and verify (the
comparison, ours). CPU is per thread, from /proc/self/task/TID/schedstat (nanoseconds
on CPU; /proc/self/task/TID/stat's utime + stime, in clock ticks, when schedstat is
missing), read at each phase boundary. It prints one line per thread:

  thread TID NAME sleeps-in SYSCALL wait W% read R% verify V% (percent of one core over the
  phase's wall time)

and the summary lines "steps ... verified ...", "rate ... steps/s", "cpu wait ... read ...".
The libfabric provider and domain come from the environment: FI_PROVIDER (vwait or verbs)
and FABRIC_IFACE (the domain name: SST takes any provider whose domain has that name;
without it SST takes only providers named verbs, gni, psm2 or cxi).
Exit status: 0 = every step arrived, every element matched; 1 = not; 2 = usage.
"""
import argparse
import os
import sys
import time

# numpy's BLAS would start a thread per core at import: none, they would only blur the
# per-thread table
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

try:
    from adios2 import bindings as adios2  # ADIOS2 2.10: the C++-like API
except ImportError:
    try:
        import adios2  # older ADIOS2: the same API at the top
    except ImportError:
        print("SKIP: no adios2 Python module (Debian: python3-adios2-serial)")
        sys.exit(77)

# x86_64 system call numbers of the calls a sleeping thread may sit in
SYSCALLS = {
    0: "read", 7: "poll", 23: "select", 35: "nanosleep", 202: "futex",
    230: "clock_nanosleep", 232: "epoll_wait", 270: "pselect6", 271: "ppoll",
    281: "epoll_pwait", 441: "epoll_pwait2",
}
TICK_NS = 1e9 / os.sysconf("SC_CLK_TCK")
PHASES = ("wait", "read", "verify")


def thread_cpu():
    """{tid: nanoseconds on CPU} for every thread of this process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        d = "/proc/self/task/" + tid
        try:
            with open(d + "/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0])
                continue
        except (OSError, ValueError, IndexError):
            pass
        try:
            with open(d + "/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[int(tid)] = (int(fields[11]) + int(fields[12])) * TICK_NS
        except (OSError, ValueError, IndexError):
            pass  # the thread ended meanwhile
    return out


def thread_where(tid):
    """(name, system call it sits in) of a thread of this process."""
    d = "/proc/self/task/%d" % tid
    try:
        with open(d + "/comm") as f:
            name = f.read().strip()
    except OSError:
        name = "?"
    try:
        with open(d + "/syscall") as f:
            first = f.read().split()[0]
        call = "running" if first == "running" else SYSCALLS.get(int(first), "sys" + first)
    except (OSError, ValueError, IndexError):
        call = "?"
    return name, call


def engine_params(args):
    return {
        "DataTransport": args.transport,
        "RendezvousReaderCount": "1",
        "OpenTimeoutSecs": str(args.open_timeout),
        "QueueLimit": "4",  # the writer blocks rather than drop steps
        "QueueFullPolicy": "Block",
    }


def writer(args):
    n = args.mib * (1 << 20) // 8
    ad = adios2.ADIOS()
    io = ad.DeclareIO("writer")
    io.SetEngine("SST")
    io.SetParameters(engine_params(args))
    base = np.arange(n, dtype=np.uint64)
    data = np.empty(n, dtype=np.uint64)
    var = io.DefineVariable("data", data, [n], [0], [n], adios2.ConstantDims)
    eng = io.Open(args.stream, adios2.Mode.Write)
    print("writer: a reader is connected", flush=True)
    t0 = time.monotonic()
    for s in range(args.steps):
        np.add(base, np.uint64(s) << np.uint64(32), out=data)
        eng.BeginStep()
        eng.Put(var, data, adios2.Mode.Sync)
        eng.EndStep()
        if args.interval > 0 and s + 1 < args.steps:
            time.sleep(args.interval)
    eng.Close()
    dt = time.monotonic() - t0
    print("writer: %d steps of %d MiB in %.2f s" % (args.steps, args.mib, dt), flush=True)
    return 0


def reader(args):
    n = args.mib * (1 << 20) // 8
    ad = adios2.ADIOS()
    io = ad.DeclareIO("reader")
    io.SetEngine("SST")
    io.SetParameters(engine_params(args))
    base = np.arange(n, dtype=np.uint64)
    want = np.empty(n, dtype=np.uint64)
    got = np.empty(n, dtype=np.uint64)
    eng = io.Open(args.stream, adios2.Mode.Read)
    print("reader: connected to the writer", flush=True)
    cpu = {p: {} for p in PHASES}
    wall = {p: 0.0 for p in PHASES}

    def account(phase, t_a, c_a, t_b, c_b):
        wall[phase] += t_b - t_a
        acc = cpu[phase]
        for tid, ns in c_b.items():
            acc[tid] = acc.get(tid, 0) + ns - c_a.get(tid, 0)

    where = {}
    steps = bad_steps = bad_elems = 0
    first = last = None
    t_prev, c_prev = time.monotonic(), thread_cpu()
    while True:
        status = eng.BeginStep(adios2.StepMode.Read, -1.0)
        t1, c1 = time.monotonic(), thread_cpu()
        account("wait", t_prev, c_prev, t1, c1)
        if status != adios2.StepStatus.OK:
            break
        step = eng.CurrentStep()
        var = io.InquireVariable("data")
        if var is None:
            print("reader: step %d has no variable 'data'" % step)
            return 1
        var.SetSelection([[0], [n]])
        eng.Get(var, got, adios2.Mode.Sync)
        eng.EndStep()
        t2, c2 = time.monotonic(), thread_cpu()
        account("read", t1, c1, t2, c2)
        if first is None:
            first = t1
        last = t2
        np.add(base, np.uint64(step) << np.uint64(32), out=want)
        wrong = int(np.count_nonzero(got != want))
        if step != steps or wrong:
            bad_steps += 1
            bad_elems += wrong
            if bad_steps <= 5:
                i = int(np.argmax(got != want)) if wrong else 0
                print("reader: step %d (expected step %d): %d of %d elements wrong; "
                      "element %d is %#x, want %#x"
                      % (step, steps, wrong, n, i, int(got[i]), int(want[i])))
        steps += 1
        # what each thread sleeps in, seen while the main thread runs (the threads end with
        # the engine, so the table below shows this last look)
        for tid in os.listdir("/proc/self/task"):
            where[int(tid)] = thread_where(int(tid))
        t_prev, c_prev = time.monotonic(), thread_cpu()
        account("verify", t2, c2, t_prev, c_prev)
    eng.Close()

    tids = sorted(set().union(*(cpu[p].keys() for p in PHASES)))
    main = os.getpid()
    for tid in tids:
        name, call = where.get(tid, ("?", "?"))
        if tid == main:
            call = "-"  # it was running: reading /proc
        pct = ["%s %.2f%%" % (p, 100.0 * cpu[p].get(tid, 0) / 1e9 / wall[p] if wall[p] else 0.0)
               for p in PHASES]
        print("thread %d %s%s sleeps-in %s %s"
              % (tid, name, " (main)" if tid == main else "", call, " ".join(pct)))
    tot = {p: sum(cpu[p].values()) / 1e9 for p in PHASES}
    others = {p: sum(v for t, v in cpu[p].items() if t != main) / 1e9 for p in PHASES}
    busiest = max((cpu["wait"].get(t, 0) + cpu["read"].get(t, 0)) / 1e9
                  / (wall["wait"] + wall["read"]) for t in tids if t != main) if len(tids) > 1 else 0.0
    print("reader: steps %d of %d, verified %d elements of %d MiB each, %d steps wrong "
          "(%d elements)" % (steps, args.steps, steps * n, args.mib, bad_steps, bad_elems))
    span = (last - first) if steps > 1 else 0.0
    print("rate %.2f steps/s (%d steps in %.2f s, first data to last)"
          % ((steps - 1) / span if span > 0 else 0.0, steps, span))
    for p in PHASES:
        print("cpu %s %.2f%% of a core over %.2f s (main %.2f%%, other threads %.2f%%)"
              % (p, 100 * tot[p] / wall[p] if wall[p] else 0.0, wall[p],
                 100 * (tot[p] - others[p]) / wall[p] if wall[p] else 0.0,
                 100 * others[p] / wall[p] if wall[p] else 0.0))
    print("busiest other thread %.2f%% of a core (wait + read)" % (100 * busiest))
    ok = steps == args.steps and bad_steps == 0
    print("reader: %s" % ("PASS every element verified" if ok else "FAIL"))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("role", choices=("writer", "reader"))
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--mib", type=int, default=1)
    ap.add_argument("--interval", type=float, default=0.1, help="writer: seconds between steps")
    ap.add_argument("--stream", default="vwait-sst")
    ap.add_argument("--open-timeout", type=int, default=60)
    ap.add_argument("--transport", default="RDMA", help="SST's DataTransport (WAN: no libfabric)")
    args = ap.parse_args()
    if args.steps < 1 or args.mib < 1:
        ap.error("--steps and --mib must be at least 1")
    return writer(args) if args.role == "writer" else reader(args)


if __name__ == "__main__":
    sys.exit(main())
