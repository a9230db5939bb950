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
missing; the main thread's own from its CPU clock, which schedstat lags by up to a tick while
the thread runs), and so are the voluntary and involuntary context switches
(/proc/self/task/TID/status) and the minor page faults (stat), read at each phase boundary. The main thread's own figures are
read first and again last at a boundary: what reading the other threads' files costs it (more
threads, more files) is charged to neither phase but shown apart ("sampling"). It prints one
line per thread:

  thread TID NAME sleeps-in SYSCALL wait W% read R% verify V% (percent of one core over the
  phase's wall time) per-step wait cpu C us vcs V ics I minflt F read cpu ... (the same)

and the summary lines "steps ... verified ...", "rate ... steps/s", "cpu wait ... read ...",
"sampling ...".

  adios2_sst.py reader --mark   also writes a marker (one write() to /dev/null, "vwait-mark
                                PHASE-begin STEP") at each phase boundary and samples nothing:
                                for a reader run under strace -f -ttt -o TRACE
  adios2_sst.py count TRACE     system calls per step of each thread of such a trace, by phase
  [--skip N]                    (between the first and the last marker, or from step N on:
                                step 0's read makes rxm's connection), and by call
The libfabric provider and domain come from the environment: FI_PROVIDER (vwait or verbs)
and FABRIC_IFACE (the domain name: SST takes any provider whose domain has that name;
without it SST takes only providers named verbs, gni, psm2 or cxi).
Exit status: 0 = every step arrived, every element matched; 1 = not; 2 = usage.
"""
import argparse
import os
import sys
import threading
import time

np = adios2 = None  # load(): not needed to count a trace


def load():
    """numpy and ADIOS2's bindings, for the writer and the reader"""
    global np, adios2
    # numpy's BLAS would start a thread per core at import: none, they would only blur the
    # per-thread table
    for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(v, "1")
    import numpy
    np = numpy
    try:
        from adios2 import bindings as a  # ADIOS2 2.10: the C++-like API
    except ImportError:
        try:
            import adios2 as a  # older ADIOS2: the same API at the top
        except ImportError:
            print("SKIP: no adios2 Python module (Debian: python3-adios2-serial)")
            sys.exit(77)
    adios2 = a


# x86_64 system call numbers of the calls a sleeping thread may sit in
SYSCALLS = {
    0: "read", 7: "poll", 23: "select", 35: "nanosleep", 202: "futex",
    230: "clock_nanosleep", 232: "epoll_wait", 270: "pselect6", 271: "ppoll",
    281: "epoll_pwait", 441: "epoll_pwait2",
}
TICK_NS = 1e9 / os.sysconf("SC_CLK_TCK")
PHASES = ("wait", "read", "verify")


def read_thread(tid):
    """(nanoseconds on CPU, voluntary, involuntary context switches, minor page faults) of a
    thread of this process, or None when it ended meanwhile. The CPU is read last: for the
    main thread, what the call costs before it is on the clock read."""
    d = "/proc/self/task/%d" % tid
    vcs = ics = 0
    try:
        with open(d + "/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        minflt, ticks = int(fields[7]), int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError):
        return None
    try:
        with open(d + "/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    vcs = int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    ics = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    if tid == os.getpid() and tid == threading.get_native_id():
        # the calling thread's own: schedstat moves only when the scheduler updates it (at a
        # tick or a sleep), the thread's CPU clock is exact
        return (time.thread_time_ns(), vcs, ics, minflt)
    try:
        with open(d + "/schedstat") as f:
            return (int(f.read().split()[0]), vcs, ics, minflt)
    except (OSError, ValueError, IndexError):
        return (ticks * TICK_NS, vcs, ics, minflt)


def snapshot():
    """The figures of every thread at a phase boundary, twice over: (end, start). The main
    thread's are read first (end: the phase that ends) and again after the other threads'
    (start: the phase that begins), so that the reads of the other threads' files, which cost
    the main thread more the more threads there are, count in neither phase."""
    main = os.getpid()
    first = read_thread(main)
    end = {main: first} if first else {}
    for tid in os.listdir("/proc/self/task"):
        tid = int(tid)
        if tid != main:
            v = read_thread(tid)
            if v:
                end[tid] = v
    start = dict(end)
    last = read_thread(main)
    if last:
        start[main] = last
    return end, start


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
    # figures per phase and thread: (ns on CPU, voluntary, involuntary context switches,
    # minor page faults)
    acc = {p: {} for p in PHASES}
    wall = {p: 0.0 for p in PHASES}
    sampling = [0]  # the main thread's CPU (ns) spent reading the other threads' files
    mark_fd = os.open("/dev/null", os.O_WRONLY) if args.mark else -1
    empty = ({}, {})

    def boundary(what, step):
        """the time and the snapshot (end, start) at a phase boundary"""
        if args.mark:
            os.write(mark_fd, b"vwait-mark %s %d" % (what.encode(), step))
            return time.monotonic(), empty
        t = time.monotonic()
        end, start = snapshot()
        main = os.getpid()
        if main in end and main in start:
            sampling[0] += start[main][0] - end[main][0]
        return t, (end, start)

    def account(phase, t_a, s_a, t_b, s_b):
        wall[phase] += t_b - t_a
        a = acc[phase]
        start, end = s_a[1], s_b[0]
        for tid, v in end.items():
            v0 = start.get(tid, (0, 0, 0, 0))
            old = a.get(tid, (0, 0, 0, 0))
            a[tid] = tuple(o + x - x0 for o, x, x0 in zip(old, v, v0))

    where = {}
    steps = bad_steps = bad_elems = 0
    first = last = None
    t_prev, s_prev = boundary("wait-begin", 0)
    while True:
        status = eng.BeginStep(adios2.StepMode.Read, -1.0)
        t1, s1 = boundary("read-begin", steps)
        account("wait", t_prev, s_prev, t1, s1)
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
        t2, s2 = boundary("verify-begin", steps)
        account("read", t1, s1, t2, s2)
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
        if not args.mark:
            for tid in os.listdir("/proc/self/task"):
                where[int(tid)] = thread_where(int(tid))
        t_prev, s_prev = boundary("wait-begin", steps)
        account("verify", t2, s2, t_prev, s_prev)
    if args.mark:
        os.write(mark_fd, b"vwait-mark end %d" % steps)
        os.close(mark_fd)
    eng.Close()
    cpu = {p: {t: v[0] for t, v in acc[p].items()} for p in PHASES}

    tids = sorted(set().union(*(cpu[p].keys() for p in PHASES)))
    main = os.getpid()
    for tid in tids:
        name, call = where.get(tid, ("?", "?"))
        if tid == main:
            call = "-"  # it was running: reading /proc
        pct = ["%s %.2f%%" % (p, 100.0 * cpu[p].get(tid, 0) / 1e9 / wall[p] if wall[p] else 0.0)
               for p in PHASES]
        per = []
        for p in ("wait", "read"):
            ns, vcs, ics, flt = acc[p].get(tid, (0, 0, 0, 0))
            k = max(steps, 1)
            per.append("%s cpu %.1f us vcs %.2f ics %.2f minflt %.2f"
                       % (p, ns / 1e3 / k, vcs / k, ics / k, flt / k))
        print("thread %d %s%s sleeps-in %s %s per-step %s"
              % (tid, name, " (main)" if tid == main else "", call, " ".join(pct), " ".join(per)))
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
    print("sampling %.1f us of the main thread's CPU per step (%d threads read; in no phase)"
          % (sampling[0] / 1e3 / max(steps, 1), len(tids)))
    ok = steps == args.steps and bad_steps == 0
    print("reader: %s" % ("PASS every element verified" if ok else "FAIL"))
    return 0 if ok else 1


BLOCKING = ("poll", "ppoll", "epoll_wait", "epoll_pwait", "epoll_pwait2", "select", "pselect6",
            "futex", "read", "nanosleep", "clock_nanosleep")


def count(args):
    """System calls per step of each thread of a reader traced with strace -f -ttt -o TRACE
    (adios2_sst.py reader --mark): the calls a thread enters between the first and the last
    marker, by phase (the main thread's markers set the phases of every thread, by time), the
    markers themselves left out. Prints per thread: its calls per step in each phase, then
    each call's count per step in wait and read, and the first arguments of the call it sleeps
    in most (to tell the threads apart)."""
    import re
    line_re = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(.*)$")
    call_re = re.compile(r"^([a-z_0-9]+)\((.*)")
    mark_re = re.compile(r'^write\(\d+, "vwait-mark ([a-z-]+) (\d+)"')
    clone_re = re.compile(r"^clone3?\(.*\)\s+=\s+(\d+)")
    fd_re = re.compile(r"^(\d+)")
    ret_re = re.compile(r"\)\s+=\s+(\d+)")
    made_re = re.compile(r"^(openat|eventfd2?|socket|epoll_create1?|timerfd_create|memfd_create|"
                         r"signalfd4?|accept4?|dup[23]?)\((.*)")
    fd_kind = {}  # fd -> what made it (the last one to, in the file's order)
    calls = []   # (time, tid, call, args, what its fd is)
    marks = []   # (time, phase, step)
    created = {}  # tid -> the thread that created it
    main = None
    with open(args.trace, errors="replace") as f:
        for line in f:
            m = line_re.match(line.rstrip("\n"))
            if not m:
                continue
            tid, t, rest = int(m.group(1)), float(m.group(2)), m.group(3)
            if rest.startswith("<... ") or rest.startswith("---") or rest.startswith("+++"):
                if rest.startswith("<... clone"):
                    c = re.search(r"\)\s+=\s+(\d+)", rest)
                    if c:
                        created[int(c.group(1))] = tid
                continue
            mk = mark_re.match(rest)
            if mk:
                main = tid if main is None else main
                marks.append((t, mk.group(1), int(mk.group(2))))
                continue
            c = call_re.match(rest)
            if not c:
                continue
            cl = clone_re.match(rest)
            if cl:
                created[int(cl.group(1))] = tid
            call, a = c.group(1), c.group(2)
            mm, r = made_re.match(rest), ret_re.search(rest)
            if mm and r:
                kind = mm.group(1)
                if kind == "openat":
                    path = re.search(r'"([^"]*)"', a)
                    kind = path.group(1).rsplit("/", 1)[-1] if path else "file"
                fd_kind[int(r.group(1))] = kind
            elif call == "pipe2":
                for fd in re.findall(r"\d+", a.split("]")[0]):
                    fd_kind[int(fd)] = "pipe"
            what = ""
            if call in ("read", "write", "ioctl", "writev", "readv", "sendmsg", "recvmsg",
                        "pread64", "fcntl"):
                fdm = fd_re.match(a)
                if fdm:
                    fd = int(fdm.group(1))
                    what = fd_kind.get(fd, "fd %d" % fd)
                    if call == "ioctl":
                        req = a.split(",")[1] if "," in a else ""
                        what += ", " + req.replace("<unfinished ...>", "").strip() if req else ""
            calls.append((t, tid, call, a, what))
    if not marks or marks[-1][1] != "end":
        print("count: no markers, or no end marker, in %s (adios2_sst.py reader --mark)"
              % args.trace)
        return 1
    # --skip N: from the wait for step N on (step 0's read makes rxm's connection)
    first_mark = next((i for i, mk in enumerate(marks)
                       if mk[1] == "wait-begin" and mk[2] == args.skip), None)
    if first_mark is None:
        print("count: no marker of step %d in %s" % (args.skip, args.trace))
        return 1
    marks = marks[first_mark:]
    steps = marks[-1][2] - args.skip
    t_first, t_end = marks[0][0], marks[-1][0]
    bounds = [(t, ph.replace("-begin", "")) for t, ph, _ in marks[:-1]]
    import bisect
    times = [b[0] for b in bounds]
    per = {}    # tid -> phase -> call -> n
    sleeps = {}  # tid -> call -> (n, first args)
    byfd = {}   # tid -> phase -> "call(what)" -> n
    for t, tid, call, a, what in calls:
        if t < t_first or t >= t_end:
            continue
        phase = bounds[bisect.bisect_right(times, t) - 1][1]
        d = per.setdefault(tid, {}).setdefault(phase, {})
        d[call] = d.get(call, 0) + 1
        if what:
            d = byfd.setdefault(tid, {}).setdefault(phase, {})
            k = "%s(%s)" % (call, what)
            d[k] = d.get(k, 0) + 1
        if call in BLOCKING:
            n, first = sleeps.setdefault(tid, {}).get(call, (0, a))
            sleeps[tid][call] = (n + 1, first)
    print("trace %s: %d steps (from step %d), %.2f s between the first and the last marker"
          % (args.trace, steps, args.skip, t_end - t_first))
    for tid in sorted(per, key=lambda x: (x != main, x)):
        ph = per[tid]
        tot = {p: sum(ph.get(p, {}).values()) / max(steps, 1) for p in PHASES}
        sl = sorted(sleeps.get(tid, {}).items(), key=lambda kv: -kv[1][0])
        label = "%s(%s" % (sl[0][0], sl[0][1][1][:40]) if sl else "-"
        print("thread %d%s created-by %s sleeps-in %s" % (
            tid, " (main)" if tid == main else "", created.get(tid, "-"), label))
        print("  calls per step: wait %.2f read %.2f verify %.2f"
              % (tot["wait"], tot["read"], tot["verify"]))
        for p in ("wait", "read"):
            for head, d in (("", ph.get(p, {})), (" by fd", byfd.get(tid, {}).get(p, {}))):
                if d:
                    print("  %s%s: %s" % (p, head, " ".join(
                        "%s %.2f" % (k, v / max(steps, 1))
                        for k, v in sorted(d.items(), key=lambda kv: (-kv[1], kv[0])))))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("role", choices=("writer", "reader", "count"))
    ap.add_argument("trace", nargs="?", help="count: the strace -f -ttt output of a --mark reader")
    ap.add_argument("--skip", type=int, default=0,
                    help="count: leave out the first SKIP steps (step 0 connects)")
    ap.add_argument("--mark", action="store_true",
                    help="reader: markers at the phase boundaries, no sampling (under strace)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--mib", type=int, default=1)
    ap.add_argument("--interval", type=float, default=0.1, help="writer: seconds between steps")
    ap.add_argument("--stream", default="vwait-sst")
    ap.add_argument("--open-timeout", type=int, default=60)
    ap.add_argument("--transport", default="RDMA", help="SST's DataTransport (WAN: no libfabric)")
    args = ap.parse_intermixed_args()
    if args.steps < 1 or args.mib < 1:
        ap.error("--steps and --mib must be at least 1")
    if args.role == "count":
        if not args.trace:
            ap.error("count needs the trace file")
        return count(args)
    load()
    return writer(args) if args.role == "writer" else reader(args)


if __name__ == "__main__":
    sys.exit(main())
