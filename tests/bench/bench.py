"""bench.py - `make bench`: faultnet's cost and accuracy, side by side with
its peers (libfiu's POSIX preload, trickle), in one run, written to
BENCHMARKS.md. Instruction counts come from valgrind's callgrind, which
counts user-space instructions and so is repeatable on a shared machine;
times are compared as ratios of runs made next to each other.

usage: bench.py BUILD_DIR OUT.md [--smoke] [--only SECTION,...]
  --smoke: every measurement with tiny counts, in seconds; checks that the
           harness works (make test runs it) and writes OUT.md all the same.
  --only:  only the sections named (hot_path, lookups, throughput, accuracy,
           control, startup, http_cost, name_lookups, backend, h2_streams,
           many_conns, tls_relay), for
           working on one;
           BENCHMARKS.md is only ever written from a whole run.
"""
import glob
import os
import re
import shutil
import socket
import signal
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1])
OUT = sys.argv[2]
SMOKE = "--smoke" in sys.argv
ONLY = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIB = os.path.join(BUILD, "libfaultnet.so")
CTL = os.path.join(BUILD, "faultctl")
BIN = os.path.join(BUILD, "bench")
MEMBER = os.path.join(BIN, "member")
TMP = tempfile.mkdtemp(prefix="fn-bench-")
RUNDIR = os.path.join(TMP, "run")
os.mkdir(RUNDIR, 0o700)
SERVER_IP, PORT = "127.80.0.1", 7400
report = []
procs = []
broken = []  # the bounds a run failed (check_bound), for its exit status


def check_bound(what, value, limit):
    """An instruction or system-call count that must stay under limit in
    every run, --smoke included (make test): exact figures, so the bound is
    generous, yet set below what the tree had before the change it keeps.
    A run that breaks one says so at its end and exits 1."""
    if value >= limit:
        broken.append("%s: %.0f, bound %d" % (what, value, limit))


def say(line=""):
    report.append(line)
    print(line, flush=True)


def conf(name, rules):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write("rules = (\n" + ",\n".join(rules) + "\n);\n")
    return path


def far_rules(n):
    """n rules that never cover the loop's 127.0.0.1: distinct /32s from
    127.100.0.0 up, all on loopback."""
    return ['{ name = "r%d"; action = "refuse"; match = { to = "127.%d.%d.%d/32"; }; }'
            % (i, 100 + ((i >> 16) & 255), (i >> 8) & 255, i & 255) for i in range(n)]


def shim_env(config, extra=None):
    e = dict(os.environ, LD_PRELOAD=LIB, FAULTNET_CONFIG=config, FAULTNET_RUNDIR=RUNDIR)
    e.update(extra or {})
    return e


def plain_env(extra=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAULTNET_")}
    e.pop("LD_PRELOAD", None)
    e.update(extra or {})
    return e


# ---- 1. added instructions per call ---------------------------------------

def callgrind_main_thread(env, n, mode=None):
    """User-space instructions of the main thread of `loop n [mode]`."""
    out = os.path.join(TMP, "cg.%d" % n)
    for f in os.listdir(TMP):
        if f.startswith("cg."):
            os.unlink(os.path.join(TMP, f))
    # The run directory's sweep stamp renewed: a join sweeps the directory
    # when no start has for 10 s (preload/control/control.c), and that one
    # run's sweep counted up to 30,000 instructions more, 3 per iteration.
    sweep_marked(env)
    subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                    "--callgrind-out-file=" + out, os.path.join(BIN, "loop"), str(n)] +
                   ([mode] if mode else []),
                   env=env, check=True, capture_output=True, timeout=600)
    main = [f for f in os.listdir(TMP) if f.startswith("cg.%d" % n) and f.endswith("-01")]
    path = os.path.join(TMP, main[0] if main else "cg.%d" % n)
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError("no totals in " + path)


def per_iteration(env, mode=None):
    lo, hi = (200, 1200) if SMOKE else (2000, 12000)
    return (callgrind_main_thread(env, hi, mode) - callgrind_main_thread(env, lo, mode)) / (hi - lo)


def peer_env(cmd):
    """The environment a peer's launcher sets up (it preloads itself)."""
    r = subprocess.run(cmd + ["env"], capture_output=True, text=True, env=plain_env())
    e = plain_env()
    for line in r.stdout.splitlines():
        k, _, v = line.partition("=")
        if k == "LD_PRELOAD" or k.startswith(("FIU_", "TRICKLE_")):
            e[k] = v
    return e


def hot_path():
    say("## 1. Added instructions per call on a socket no rule matches")
    say("")
    say("Method: valgrind --tool=callgrind on `loop`, a single-threaded loopback send + poll"
        " + recv loop; main thread's instructions for 12,000 minus 2,000 iterations, over"
        " 10,000. Rules are /32s from 127.100.0.0 up, so none covers the loop's loopback socket.")
    say("faultnet interposes 1 of the 3 calls in the loop (`recv`); libfiu and trickle"
        " interpose all 3. \"Per call\" divides the added instructions by the calls each"
        " tool intercepts.")
    say("")
    base = per_iteration(plain_env())
    rows = [("no preload", base, None, 0)]
    c0, c100, c10k = conf("r0.conf", []), conf("r100.conf", far_rules(100)), \
        conf("r10k.conf", far_rules(10000))
    # Each policy's compiled copy and its second name made before the
    # counts (core/compiled_file.c), so that both runs of a row find it the
    # same way and neither makes it.
    settle_all([c0, c100, c10k], [RUNDIR])
    runs = [("faultnet, 0 rules", c0, None),
            ("faultnet, 100 rules", c100, None),
            ("faultnet, 10,000 rules", c10k, None),
            ("faultnet, 10,000 rules, FAULTNET_CONTROL=off", c10k, {"FAULTNET_CONTROL": "off"}),
            ("faultnet, 0 rules, FAULTNET_CONTROL=off", c0, {"FAULTNET_CONTROL": "off"})]
    for label, cfg, extra in runs[1:4:2] if SMOKE else runs:
        rows.append((label, per_iteration(shim_env(cfg, extra)), None, 1))
    if shutil.which("fiu-run"):
        rows.append(("libfiu POSIX preload (fiu-utils), no failure point enabled",
                     per_iteration(peer_env(["fiu-run", "-x"])), None, 3))
    else:
        rows.append(("libfiu: fiu-run not installed", None, None, 3))
    if shutil.which("trickle"):
        rows.append(("trickle -s, shaping at 1 MB/s",
                     per_iteration(peer_env(["trickle", "-s", "-d", "1000", "-u", "1000"])),
                     None, 3))
    else:
        rows.append(("trickle: not installed", None, None, 3))
    say("| run | instructions per iteration | added per iteration | added per intercepted call |")
    say("|---|---|---|---|")
    results = {}
    for label, v, _, calls in rows:
        if v is None:
            say("| %s | - | - | - |" % label)
            continue
        added = v - base
        per_call = "-" if not calls else "%.0f" % (added / calls)
        say("| %s | %.0f | %.0f | %s |" % (label, v, added, per_call))
        results[label] = (v, added, calls)
    say("")
    worst_on = max(results[k][1] for k in results if k.startswith("faultnet") and "off" not in k)
    worst_off = max(results[k][1] for k in results if k.startswith("faultnet") and "off" in k)
    say("Target: under 20 added instructions per unmatched call at any rule count, under 7"
        " per iteration above the bare loop. The default mode (no thread of the shim's:"
        " faultctl reads each process's state file) adds %.0f per iteration at most: %s per"
        " call, %s per iteration. FAULTNET_CONTROL=off (no state file) adds %.0f."
        % (worst_on, "met" if worst_on < 20 else "missed",
           "met" if worst_on < 7 else "missed", worst_off))
    say("")


# ---- 2. rule lookup -------------------------------------------------------

def lookup_cost(n, k, mode):
    out = os.path.join(TMP, "lk.%d.%s" % (n, mode))
    r = subprocess.run(["valgrind", "--tool=callgrind", "--toggle-collect=fn_policy_match",
                        "--callgrind-out-file=" + out, os.path.join(BIN, "lookup"), str(n), str(k),
                        mode], check=True, capture_output=True, text=True, timeout=900)
    with open(out) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1]) / k, r.stdout.strip()
    raise RuntimeError("no totals")


def lookups():
    say("## 2. Rule lookup for a matched connect, and what a policy's size costs")
    say("")
    say("Method: callgrind, instructions inside `fn_policy_match` per lookup, called as the shim"
        " calls it on a connect or an addressed send (with the rule seen reported; `lookup N K"
        " hit|miss|hit6|miss6|hit6x|hit6m`): N rules of one loopback /32 each (127.100.0.0/32,"
        " 127.100.0.1/32, ...), or of one IPv6 /128 each (fd00:91::I, only looked up), or of"
        " one IPv6 /128 each at two sites (fd00:91::I for even I, fd01:91::I for odd), or of"
        " one IPv6 /48 each at 16 sites that differ in their second byte, as a cloud's"
        " published ranges do (2a0S:...::/48 for S = I mod 16); \"hit\""
        " is an address only the last rule covers, \"miss\" one no rule covers (IPv4: 127.99.x.y;"
        " IPv6: the last rule's address with its byte 12 set, off the bytes all the rules"
        " share). The rule index is a multibit trie (strides of 16 bits, then 8) whose leaves"
        " list the covering rules in file order"
        " (core/lpm.c); a step down is an add and a load. IPv6 is rooted after the bytes all"
        " its prefixes share (a home: fd00:91::/104 here, one comparison instead of 13 steps),"
        " or after each site's bytes, for up to 32 sites that differ in one byte (the"
        " address's byte there picks the home to compare); a home also compares the bytes all"
        " its prefixes have further on (the /48s' bytes 4 and 5), so that no step is taken for"
        " them; a run of one-way nodes below is one skip, taken out of line, when it replaces"
        " 12 steps or more. The first candidate is judged"
        " from one byte per rule. Build time (under callgrind, so slow) and memory from the"
        " same program; the load time parses a policy file of N IPv4 rules natively (`lookup N"
        " 0 load`). Each root is 65,536 slots (256 KiB allocated, only the pages a prefix"
        " touches written), which is most of a small policy's bytes per prefix.")
    say("")
    say("| rules | instructions per lookup, IPv4 hit | IPv4 miss | IPv6 /128 hit | IPv6 miss |"
        " IPv6 /128 at two sites, hit | IPv6 /48 at 16 sites, hit | index built in |"
        " index bytes per prefix (IPv4) |")
    say("|---|---|---|---|---|---|---|---|---|")
    sizes = [10, 1000, 100000, 1000000] if not SMOKE else [10, 1000]
    worst4 = worst6 = worst6x = worst6m = 0
    for n in sizes:
        k = 200 if n < 100000 else 50
        hit, info = lookup_cost(n, k, "hit")
        miss, _ = lookup_cost(n, k, "miss")
        hit6, _ = lookup_cost(n, k, "hit6")
        miss6, _ = lookup_cost(n, k, "miss6")
        hit6x, _ = lookup_cost(n, k, "hit6x")
        hit6m, _ = lookup_cost(n, k, "hit6m")
        worst4 = max(worst4, hit, miss)
        worst6 = max(worst6, hit6, miss6)
        worst6x = max(worst6x, hit6x)
        worst6m = max(worst6m, hit6m)
        built = info.split("built in ")[1].split(",")[0]
        per = info.split("(")[1].split(" per")[0]
        say("| %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %s | %s |"
            % (n, hit, miss, hit6, miss6, hit6x, hit6m, built, per))
    say("")
    n_load = 100000 if not SMOKE else 1000
    loads = []
    for _ in range(5):
        r = subprocess.run([os.path.join(BIN, "lookup"), str(n_load), "0", "load"],
                           capture_output=True, text=True, check=True, timeout=300)
        loads.append(float(r.stdout.strip().split(": ")[1].split()[0]))
    loads.sort()
    say("Loading a policy file of %d rules (5 runs): median %.3f s, from %.3f to %.3f s (target:"
        " under 0.5 s for 100,000: %s)." % (n_load, loads[2], loads[0], loads[-1],
                            "met" if loads[2] < 0.5 else "missed"))
    say("")
    say("Target: under 50 instructions per lookup at any rule count. IPv4: %s (%.0f at most)."
        " IPv6 at one site: %s (%.0f at most). IPv6 at two sites: %s (%.0f at most)."
        " IPv6 /48s at 16 sites: %s (%.0f at most). Below a home's root a destination walks"
        " one 8-bit step per byte in which that home's prefixes differ: none for the /128s"
        " at one site (at 100,000 rules their byte 13 takes two values: two homes), one at"
        " two sites from 100,000 rules, none for the /48s (they differ in bytes 2 and 3 at"
        " most, which the root takes). The"
        " lookup runs only for a connect or an addressed"
        " send on a socket whose protocol some rule covers; a socket no rule's protocol"
        " covers looks nothing up (below)."
        % ("met" if worst4 < 50 else "missed", worst4, "met" if worst6 < 50 else "missed", worst6,
           "met" if worst6x < 50 else "missed", worst6x,
           "met" if worst6m < 50 else "missed", worst6m))
    say("")
    base = per_iteration(plain_env(), "udp")
    tcp_only = per_iteration(shim_env(conf("r100.conf", far_rules(100)),
                                      {"FAULTNET_CONTROL": "off"}), "udp")
    say("A datagram to an address no rule covers, with 100 TCP-only rules (`loop N udp`,"
        " sendto + recv, FAULTNET_CONTROL=off): %.0f instructions per datagram without the"
        " shim, %.0f with it (%+.0f)." % (base, tcp_only, tcp_only - base))
    say("")
    base = per_iteration(plain_env(), "udpsock")
    tcp_only = per_iteration(shim_env(conf("r100.conf", far_rules(100)),
                                      {"FAULTNET_CONTROL": "off"}), "udpsock")
    say("A UDP socket no rule can cover, whole (`loop N udpsock`: socket, one sendto, close;"
        " the same 100 TCP-only rules): %.0f instructions without the shim, %.0f with it"
        " (%+.0f; target: under 40 added: %s). The socket hook marks the fd UDP (kept across"
        " the call: its kind, judged before); a send checks that no change is pending (else"
        " it catches up first, so a rule added live reaches the next send) and asks the policy"
        " in force whether any rule can cover a UDP socket; close looks at the fd's mark and"
        " goes on. Each hook also adds its own call and libc's through a pointer."
        % (base, tcp_only, tcp_only - base, "met" if tcp_only - base < 40 else "missed"))
    say("")
    # +63 before the send test read one summary bit and the socket hook
    # kept neither the fd high-water mark nor the first-socket test; +43
    # before the send bit was picked by the fd's whole flags byte (no
    # mask), the group counter compared from memory, socket()'s callee
    # called through memory and its kind zeroed only on the way out.
    check_bound("uncovered UDP socket + sendto + close, added instructions",
                tcp_only - base, 40)


# ---- traffic helpers ------------------------------------------------------

def start_server():
    p = subprocess.Popen([os.path.join(BIN, "stream"), "serve", SERVER_IP, str(PORT)],
                         env=plain_env(), stdout=subprocess.PIPE, text=True)
    procs.append(p)
    p.stdout.readline()


def stream(args, env, timeout=300):
    r = subprocess.run([os.path.join(BIN, "stream")] + args, env=env, capture_output=True,
                       text=True, timeout=timeout)
    if r.returncode:
        raise RuntimeError("stream %s: %s" % (" ".join(args), r.stderr))
    return r.stdout.split("\n")


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


# ---- 3. relay throughput --------------------------------------------------

def start_peer(cmd):
    p = subprocess.Popen(cmd, env=plain_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True)
    procs.append(p)
    return p


def peer_relays():
    """(label, ip, port, pid) of the relays measured beside faultnet's: a
    plain copy relay (two threads, 1 MiB buffers) and socat -b 1048576."""
    peers = []
    p = start_peer([os.path.join(BIN, "copyrelay"), "127.80.0.2", str(PORT + 1), SERVER_IP,
                    str(PORT)])
    if p.stdout.readline().strip() == "ready":
        peers.append(("copy relay (2 threads, 1 MiB buffers)", "127.80.0.2", PORT + 1, p.pid))
    if shutil.which("socat"):
        p = start_peer(["socat", "-b", "1048576", "TCP-LISTEN:%d,bind=127.80.0.3,fork,reuseaddr"
                    % (PORT + 2), "TCP:%s:%d" % (SERVER_IP, PORT)])
        for _ in range(50):
            try:
                socket.create_connection(("127.80.0.3", PORT + 2), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        peers.append(("socat -b 1048576", "127.80.0.3", PORT + 2, p.pid))
    return peers


def cpu_seconds(pid):
    """CPU seconds process pid and its reaped children have used."""
    if not pid:
        return 0.0
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def round_trips(ip, port, env, n, size):
    """Round trips of size bytes each way per second."""
    r = [float(x) for x in stream(["rr", ip, str(port), str(n), str(size)], env) if x]
    return 1e6 * len(r) / sum(r)


def bulk_rate(ip, port, env, mib, relay_pid=None):
    """Bulk MiB/s, and the CPU seconds per GiB of bulk that the client and
    the relay used (with the shim, the relay is a thread of the client's; a
    peer is a process of its own, and socat's connection a child it reaps:
    given time to)."""
    before = cpu_seconds(relay_pid)
    out = stream(["bulk", ip, str(port), str(mib)], env)
    if relay_pid:
        time.sleep(0.3)
    cpu = float(out[1]) + cpu_seconds(relay_pid) - before
    return mib / float(out[0]), cpu * 1024 / mib


# Round trips take a fraction of a second a run, and on two shared cores one
# run's figure swings with where its threads happen to be scheduled (a
# fifth either way here): each round measures them this many times a path.
RR_PER_ROUND = 3


def throughput():
    say("## 3. A relayed connection against a direct one, and against other relays")
    say("")
    relay = conf("relay.conf", ['{ name = "relay"; action = "bandwidth"; rate = 1099511627776L;'
                                ' match = { to = "%s/32"; }; }' % SERVER_IP])
    # What established = true costs while its rule is off: the connection
    # is relayed untouched, so that an enable can reach it.
    held = conf("established.conf", ['{ name = "route"; action = "blackhole"; established = true;'
                                     ' enabled = false; match = { to = "%s/32"; }; }' % SERVER_IP])
    mib = 16 if SMOKE else 1024
    # Run by run the bulk ratio spreads by a fifth (its quartiles), and with
    # 9 rounds two runs of one relay gave 0.92 and 0.96 against a target of
    # 0.95. The median of n ratios has a standard error of about
    # 1.25 s / sqrt(n): 15 rounds take it from about 0.06 to 0.05, which
    # still leaves a ratio near the target to either side of it.
    rounds = 1 if SMOKE else 15
    n_rr = 200 if SMOKE else 5000
    peers = peer_relays()
    say("Method: `stream bulk` sends %d MiB to a loopback sink, `stream rr` makes %d round"
        " trips of 64 bytes and %d of 64 KiB: direct (no preload), through faultnet's relay (a `bandwidth`"
        " rule of 1 TiB/s, i.e. relayed with no delay), under an `established = true`"
        " blackhole that is off (relayed untouched so that an enable reaches it), and"
        " through the peers, each a relay"
        " process between the same client and server: %s. %d rounds, alternating (each round"
        " starts one path further on), medians"
        " (the round trips %d times a round: %d runs a path); %d CPUs. CPU per GiB: the seconds of CPU the client and the relay used for the bulk"
        " transfer (with the shim the relay is a thread of the client's; a peer is a process"
        " of its own), scaled to 1 GiB."
        % (mib, n_rr, n_rr // 5, ", ".join(x[0] for x in peers) or "none installed", rounds,
           1 if SMOKE else RR_PER_ROUND, rounds * (1 if SMOKE else RR_PER_ROUND),
           os.cpu_count() or 0))
    say("")
    rows = [("direct", SERVER_IP, PORT, plain_env(), None),
            ("faultnet relay", SERVER_IP, PORT, shim_env(relay), None),
            ("faultnet, established blackhole off", SERVER_IP, PORT, shim_env(held), None)]
    rows += [(label, ip, port, plain_env(), pid) for label, ip, port, pid in peers]
    got = {row[0]: ([], [], [], []) for row in rows}
    for r in range(rounds):
        # Each round starts one path further on: no path always runs
        # right after the same one (the direct bulk transfer, say).
        order = rows[r % len(rows):] + rows[:r % len(rows)]
        for label, ip, port, env, pid in order:
            for k, v in enumerate(bulk_rate(ip, port, env, mib, pid)):
                got[label][k].append(v)
        for _ in range(1 if SMOKE else RR_PER_ROUND):
            for label, ip, port, env, pid in order:
                got[label][2].append(round_trips(ip, port, env, n_rr, 64))
                got[label][3].append(round_trips(ip, port, env, n_rr // 5, 65536))
    med = {k: tuple(statistics.median(x) for x in v) for k, v in got.items()}
    say("| path | bulk MiB/s | of direct | CPU s per GiB | 64-byte round trips /s | of direct |"
        " 64 KiB round trips /s | of direct |")
    say("|---|---|---|---|---|---|---|---|")
    d = med["direct"]
    for row in rows:
        b, c, r, k = med[row[0]]
        say("| %s | %.0f | %.2f | %.2f | %.0f | %.2f | %.0f | %.2f |"
            % (row[0], b, b / d[0], c, r, r / d[2], k, k / d[3]))
    say("")
    fb, _, fr, fk = med["faultnet relay"]
    if peers:
        relay_against_peers(got, med, [p[0] for p in peers])
    held_label = "faultnet, established blackhole off"
    hb, _, hr, hk = med[held_label]
    bulk, big = (paired(got[held_label][i], got["faultnet relay"][i]) for i in (0, 3))
    say("Both faultnet rows go through the same relay, one under a rate it never reaches and"
        " one untouched: the second is %.2f of the first for bulk, %.2f and %.2f for the round"
        " trips (ratios of medians), about how far this run's medians move for one path; run"
        " by run in the same round, %.2f for bulk (quartiles %.2f to %.2f) and %.2f for 64 KiB"
        " round trips (%.2f to %.2f)." % ((hb / fb, hr / fr, hk / fk) + bulk + big))
    say("")
    return fb / med["direct"][0]


def paired(mine, theirs):
    """The median and quartiles of mine[i] / theirs[i]: runs of two paths
    made in the same round, so under the same load on the machine."""
    r = sorted(a / b for a, b in zip(mine, theirs))
    return statistics.median(r), pct(r, 25), pct(r, 75)


def relay_against_peers(got, med, peers):
    """The target's verdict: faultnet's relay against the peer with the best
    median, run by run in the same round, for bulk and 64 KiB round trips.
    One path's runs swing by a tenth or more from run to run on two shared
    cores (where the scheduler puts three busy threads), and the medians of
    the two faultnet rows, one relay, differ by as much: a ratio of medians
    would judge that noise. A round's runs share the machine's state."""
    fb, fc, _, fk = med["faultnet relay"]
    best = [max(peers, key=lambda p: med[p][i]) for i in (0, 2, 3)]
    bulk, small, big = (paired(got["faultnet relay"][i], got[b][i])
                        for i, b in zip((0, 2, 3), best))
    ok = min(bulk[0], big[0]) >= 0.95
    say("faultnet's relay against the best peer (%s for bulk, %s for 64 KiB round trips), the"
        " median of its ratios to that peer in the same round: %.2f for bulk (quartiles %.2f"
        " to %.2f) and %.2f for 64 KiB round trips (%.2f to %.2f); target: 0.95 or more in"
        " both: %s. As ratios of the medians in the table: %.2f and %.2f. For 64-byte round"
        " trips, which the target leaves out: %.2f (%.2f to %.2f); there the relay's one"
        " thread waits in epoll_wait and then reads, two system calls where a copy thread"
        " blocked in read makes one."
        % ((best[0], best[2]) + bulk + big + ("met" if ok else "missed", fb / med[best[0]][0],
                                              fk / med[best[2]][3]) + small))
    say("")
    least_c = min(med[p][1] for p in peers)
    say("CPU for the bulk transfer, client and relay together: faultnet %.2f s per GiB,"
        " the most frugal peer %.2f (%.2f of it)." % (fc, least_c, fc / least_c))
    say("")


# ---- 7. HTTP rules --------------------------------------------------------

def http_cost():
    say("## 7. Per-request cost of an HTTP rule")
    say("")
    n = 200 if SMOKE else 5000
    rounds = 1 if SMOKE else 5
    relay = conf("http-relay.conf", ['{ name = "relay"; action = "bandwidth"; rate = 1099511627776L;'
                                     ' match = { to = "%s/32"; }; }' % SERVER_IP])
    http = conf("http-rule.conf", ['{ name = "never"; action = "respond"; status = 503;'
                                   ' match = { to = "%s/32"; path = "/never"; }; }' % SERVER_IP])
    say("Method: `stream http` makes %d keep-alive HTTP/1.1 GETs (64-byte answers) one after"
        " another on one connection: direct (no preload), relayed as bytes (a `bandwidth` rule"
        " of 1 TiB/s) and relayed under an HTTP rule that forwards every request (a `respond`"
        " rule whose path never matches: each request and answer is parsed and the rules are"
        " consulted); %d rounds, medians of each round's median." % (n, rounds))
    say("")
    log = os.path.join(TMP, "requests.jsonl")
    res = {"direct": [], "relay": [], "http": [], "logged": []}
    for _ in range(rounds):
        for name, env in (("direct", plain_env()), ("relay", shim_env(relay)),
                          ("http", shim_env(http)),
                          ("logged", shim_env(http, {"FAULTNET_REQUESTS": log}))):
            if os.path.exists(log):
                os.unlink(log)
            v = [float(x) for x in stream(["http", SERVER_IP, str(PORT), str(n)], env) if x]
            res[name].append(statistics.median(v))
    d, r, h, g = (statistics.median(res[k]) for k in ("direct", "relay", "http", "logged"))
    say("| path | µs per request | over direct | over relayed |")
    say("|---|---|---|---|")
    say("| direct | %.1f | | |" % d)
    say("| relayed as bytes | %.1f | %+.1f | |" % (r, r - d))
    say("| relayed under an HTTP rule that forwards | %.1f | %+.1f | **%+.1f** |" % (h, h - d, h - r))
    say("| the same with the request log on (`FAULTNET_REQUESTS`) | %.1f | %+.1f | %+.1f |"
        % (g, g - d, g - r))
    say("")
    say("The HTTP rule's own cost is the last column: parsing the request and the answer and"
        " one rule decision per request, on top of the relay.")
    say("")
    off, on = per_request(shim_env(http)), per_request(shim_env(http, {"FAULTNET_REQUESTS": log}))
    say("The request log's cost, by callgrind (user-space instructions of every thread of"
        " `stream http`, per request, from the difference of two runs; the median of 3):")
    say("")
    say("| request log | instructions per request | added |")
    say("|---|---|---|")
    say("| off | %.0f | |" % off)
    say("| on | %.0f | **%+.0f** |" % (on, on - off))
    say("")
    say("Target: under 2,000 added (issue 43); the run fails above it.")
    say("")
    check_bound("the request log's added instructions per request", on - off, 2000)


def sweep_marked(env):
    """Marks the run directory swept now: a process sweeps it at its join
    at most every 10 s, which is no figure's cost (a sweep in one of two
    runs whose difference is measured counted every file of the earlier
    sections)."""
    d = env.get("FAULTNET_RUNDIR", RUNDIR)
    if os.path.isdir(d):
        stamp = os.path.join(d, ".sweep")
        open(stamp, "a").close()
        os.utime(stamp, None)


def callgrind_threads(env, argv):
    """User-space instructions of every thread of a program, summed."""
    sweep_marked(env)
    for f in os.listdir(TMP):
        if f.startswith("cgt."):
            os.unlink(os.path.join(TMP, f))
    subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                    "--callgrind-out-file=" + os.path.join(TMP, "cgt")] + argv,
                   env=env, check=True, capture_output=True, timeout=900)
    total = 0
    for f in os.listdir(TMP):
        if f.startswith("cgt"):
            with open(os.path.join(TMP, f)) as fh:
                total += next((int(x.split()[1]) for x in fh
                               if x.startswith(("summary:", "totals:"))), 0)
    return total


def per_request(env):
    """Instructions per request, from the difference of two runs; the
    median of 3 such differences outside --smoke, since how often the
    relay's thread wakes varies from run to run (by about 100 a request)."""
    lo, hi = (20, 120) if SMOKE else (200, 1200)
    run = lambda n: callgrind_threads(  # noqa: E731
        env, [os.path.join(BIN, "stream"), "http", SERVER_IP, str(PORT), str(n)])
    return statistics.median((run(hi) - run(lo)) / (hi - lo) for _ in range(1 if SMOKE else 3))


# ---- 8. name lookups ------------------------------------------------------

def resolve_cost(env, n, name):
    out = os.path.join(TMP, "rs.%d" % n)
    subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                    os.path.join(BIN, "resolve"), str(n), name], env=env, check=True,
                   capture_output=True, timeout=600)
    with open(out) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError("no totals")


def per_lookup(env, name="localhost"):
    lo, hi = (20, 120) if SMOKE else (200, 1200)
    return (resolve_cost(env, hi, name) - resolve_cost(env, lo, name)) / (hi - lo)


def dns_rules(n, last=None):
    """n dns rules, half exact names (r0.example.test, ...), half *.suffix
    patterns (*.s1.example.test, ...), none of which matches localhost or
    a.s.example.test; then the rule last, if given."""
    rules = ['{ name = "d%d"; action = "dns"; error = "nxdomain"; match = { host = "%s"; }; }'
             % (i, ("r%d.example.test" if i % 2 == 0 else "*.s%d.example.test") % i)
             for i in range(n)]
    return rules + ([last] if last else [])


def name_lookups():
    say("## 8. What a getaddrinfo call costs under dns rules")
    say("")
    n = 1000 if SMOKE else 10000
    say("Method: callgrind on `resolve N NAME` (getaddrinfo + freeaddrinfo), instructions per call"
        " from the difference of two values of N, with FAULTNET_CONTROL=off. The dns rules are"
        " %d: exact names (r0.example.test, r2.example.test, ...) and *.suffix patterns"
        " (*.s1.example.test, ...), half each. `localhost` (in /etc/hosts) is resolved by glibc"
        " in every row but the last four: matched by no rule, or by the last rule (an exact"
        " name whose condition, after = 10^15, says no, so that glibc answers; its pattern and"
        " its condition are judged). The last four rows answer a.s.example.test from a"
        " *.s.example.test rule with an address, alone or after the %d other rules, and the"
        " last two alternate it with b.s.example.test, answered by the same rule."
        % (n, n))
    say("")
    last_exact = ('{ name = "last"; action = "dns"; error = "nxdomain"; after = 1000000000000000L;'
                  ' match = { host = "localhost"; }; }')
    last_suffix = ('{ name = "last"; action = "dns"; answer = [ "127.0.0.1" ];'
                   ' match = { host = "*.s.example.test"; }; }')
    none = conf("dns0.conf", ['{ name = "tcp"; action = "refuse"; match = { to = "127.100.0.1/32"; }; }'])
    rows = [("faultnet, 1 dns rule, localhost matches none", conf("dns1.conf", dns_rules(1)),
             "localhost"),
            ("faultnet, %d dns rules, localhost matches none" % n, conf("dnsn.conf", dns_rules(n)),
             "localhost"),
            ("faultnet, %d dns rules, localhost matched by the last" % n,
             conf("dnsl.conf", dns_rules(n, last_exact)), "localhost"),
            ("faultnet, 1 dns rule answering a.s.example.test", conf("dnss1.conf", [last_suffix]),
             "a.s.example.test"),
            ("faultnet, %d dns rules, the last answering a.s.example.test" % n,
             conf("dnss.conf", dns_rules(n, last_suffix)), "a.s.example.test"),
            ("faultnet, 1 dns rule answering a.s.example.test and b.s.example.test,"
             " alternating", conf("dnss1.conf", [last_suffix]), "a.s.example.test,b.s.example.test"),
            ("faultnet, %d dns rules, the last answering a.s.example.test and b.s.example.test,"
             " alternating" % n, conf("dnss.conf", dns_rules(n, last_suffix)),
             "a.s.example.test,b.s.example.test")]
    base = per_lookup(plain_env())
    v0 = per_lookup(shim_env(none, {"FAULTNET_CONTROL": "off"}))
    # The same number of rules, none of them dns rules: what a policy of
    # that size costs glibc's own getaddrinfo (its malloc meets the heap the
    # policy's load left), which no dns rule causes.
    v0n = per_lookup(shim_env(conf("far%d.conf" % n, far_rules(n)), {"FAULTNET_CONTROL": "off"}))
    say("| run | instructions per getaddrinfo | added over no preload | added over no dns rule |")
    say("|---|---|---|---|")
    say("| no preload | %.0f | | |" % base)
    say("| faultnet, no dns rule | %.0f | %+.0f | |" % (v0, v0 - base))
    say("| faultnet, no dns rule, %d TCP rules | %.0f | %+.0f | %+.0f |" % (n, v0n, v0n - base, v0n - v0))
    got = []
    for label, c, name in rows:
        v = per_lookup(shim_env(c, {"FAULTNET_CONTROL": "off"}), name)
        got.append(v)
        say("| %s | %.0f | %s | %s |" % (label, v, "%+.0f" % (v - base) if name == "localhost" else "",
                                       "%+.0f" % (v - v0) if name == "localhost" else ""))
    say("")
    worst = max(got[1], got[2]) - v0
    say("Target: a getaddrinfo under %d dns rules, the match among the last, adds under 300"
        " instructions over no dns rule: %s (%+.0f at most; %+.0f from 1 dns rule to"
        " %d, glibc's share under a policy of that size included). With an answering *.suffix rule, the %d rules before it add %+.0f."
        % (n, "met" if worst < 300 else "missed", worst, got[1] - got[0], n, n, got[4] - got[3]))
    say("A thread keeps the last name it looked up (preload/dns/resolve.c: struct memo), so"
        " the rows above that look one name up again and again read neither the index nor the"
        " name memory after the first call. Names that alternate miss it at every call: the"
        " last two rows, where the %d rules before the answering one add %+.0f (the index: a"
        " number of steps that does not grow with the rules), and a call costs %+.0f more than"
        " the same name looked up again (the index walked, the name memory searched and its"
        " list recorded)." % (n, got[6] - got[5], got[6] - got[4]))
    say("")
    say("Of these, %+.0f are glibc's own under a policy of %d rules of any kind (the row with"
        " %d TCP rules): over that row the %d dns rules add %+.0f at most, the shim's resolver"
        " hook, the index, the per-name counts and the name memory. glibc's share is its"
        " malloc's: getaddrinfo reads /etc/hosts through stdio, whose 4 KiB buffer comes from"
        " the main heap; a free chunk there, left between allocations that stay, is split by"
        " each malloc of it and merged by each free. A large policy's index and what building"
        " it needs are mappings of their own (core/bigalloc.h: fn_map_realloc), and a start"
        " that finds the policy compiled reads no parse tree: the heap holds no such chunk"
        " (+317 here while the index's arrays grew and were freed in the heap)."
        % (v0n - v0, n, n, n, max(got[1], got[2]) - v0n))
    say("Names are matched through the dns rules' name index (core/hostidx.c): exact names and"
        " *.suffix patterns hashed from the name's end, one pass over the name, then only the"
        " rules whose key it met are judged, in file order. Any dns rule also turns on the"
        " per-name counts and the memory of which name an address came from (preload/dns), which"
        " the first row above holds. A thread keeps its last name with the dns rules whose"
        " pattern covers it (for the policy in force) and the list last recorded for it"
        " (preload/dns/resolve.c: struct memo): the same name looked up again, as here, reads"
        " neither the index nor the name memory, only the candidates' state and conditions and"
        " the per-name counts.")
    say("")
    # +968 (+860 under --smoke) before the index hashed words and the name
    # memory compared words; +811 (+649) before the per-name counts placed
    # a name a word at a time and found it at its place without a frame;
    # +522 (+276 after) before a thread kept its last name's candidates and
    # recorded list (preload/dns/resolve.c: struct memo).
    check_bound("getaddrinfo, dns rules, the match the last, added over no dns rule", worst,
                350)
    # The index's slots from a key's low bits gave +352 here (long runs of
    # slots for r1.example.test, r2.example.test, ...).
    check_bound("getaddrinfo answered by a *.suffix rule, added by the dns rules before it",
                got[4] - got[3], 100)
    # +317 while the index's build left its grown and freed arrays in the
    # heap between the policy's long-lived allocations (10,000 rules).
    check_bound("getaddrinfo under %d TCP rules, added over no rule (glibc's malloc)" % n,
                v0n - v0, 100)


# ---- 4. accuracy ----------------------------------------------------------

def accuracy():
    say("## 4. Accuracy of the faults")
    say("")
    n = 50 if SMOKE else 1000
    rules = ['{ name = "lat%d"; action = "latency"; latency_ms = %d; direction = "up"; '
             'match = { to = "%s/32"; }; }' % (ms, ms, SERVER_IP) for ms in (1, 10, 50)]
    base = [float(x) for x in stream(["rr", SERVER_IP, str(PORT), str(n), "64"], plain_env())
            if x]
    base_med = statistics.median(base)
    say("Method: `stream rr`, %d round trips of 64 bytes through a latency rule applied one"
        " way (`direction = \"up\"`), so each round trip should take the rule's latency"
        " more than a direct one (median %.0f us here). Error = round trip - direct median"
        " - latency." % (n, base_med))
    say("")
    say("| latency rule | median error | p99 error |")
    say("|---|---|---|")
    acc = {}
    for ms, rule in zip((1, 10, 50), rules):
        cfg = conf("lat%d.conf" % ms, [rule])
        rtts = [float(x) for x in stream(["rr", SERVER_IP, str(PORT), str(n), "64"],
                                         shim_env(cfg), timeout=600) if x]
        errs = [r - base_med - ms * 1000 for r in rtts]
        acc[ms] = (statistics.median(errs), pct(errs, 99))
        say("| %d ms | %+.0f us | %+.0f us |" % (ms, acc[ms][0], acc[ms][1]))
    say("")
    secs = 1 if SMOKE else 3
    say("Bandwidth: `stream down` reads a loopback source through a `bandwidth` rule for"
        " %d s (counting from the first read, so a burst allowance does not count)." % secs)
    say("")
    say("| rate rule | achieved | achieved / target |")
    say("|---|---|---|")
    for rate, label in ((65536, "64 KiB/s"), (10485760, "10 MiB/s")):
        cfg = conf("bw%d.conf" % rate, ['{ name = "bw"; action = "bandwidth"; rate = %d; '
                                         'direction = "down"; match = { to = "%s/32"; }; }'
                                         % (rate, SERVER_IP)])
        got = float(stream(["down", SERVER_IP, str(PORT), str(secs)], shim_env(cfg))[0])
        say("| %s | %.0f B/s | %.3f |" % (label, got, got / rate))
    say("")
    say("Connect-time faults: when the application sees the result against when it should.")
    say("")
    say("| fault | expected | median | worst |")
    say("|---|---|---|---|")
    bh = conf("bh.conf", ['{ name = "bh"; action = "blackhole"; match = { to = "%s/32"; }; }'
                          % SERVER_IP])
    k = 2 if SMOKE else 5
    res = [x.split() for x in stream(["connect", SERVER_IP, str(PORT), str(k), "1"],
                                     shim_env(bh), timeout=120) if x]
    t = [float(r[0]) / 1e6 for r in res]
    ok = all(r[1] == "110" for r in res)
    say("| blackhole, TCP_SYNCNT=1 (ETIMEDOUT%s) | 3.000 s (SYN, one retry after 1 s, 2 s"
        " more) | %.3f s | %.3f s |" % ("" if ok else ": NOT SEEN", statistics.median(t),
                                       max(t)))
    dl = conf("delay.conf", ['{ name = "d"; action = "delay"; delay_ms = 200; '
                             'match = { to = "%s/32"; }; }' % SERVER_IP])
    k = 10 if SMOKE else 100
    res = [x.split() for x in stream(["connect", SERVER_IP, str(PORT), str(k), "0"],
                                     shim_env(dl), timeout=120) if x]
    t = [float(r[0]) / 1e3 for r in res]
    say("| delay 200 ms (%d connects) | 200 ms | %.1f ms | %.1f ms |"
        % (k, statistics.median(t), max(t)))
    say("")
    return acc


# ---- 5. control -----------------------------------------------------------

def control():
    say("## 5. Control: `faultctl enable` until it exits")
    say("")
    runs = 3 if SMOKE else 20
    fiu = shutil.which("fiu-run") and shutil.which("fiu-ctrl")
    say("Method: N processes under the shim in one group (tests/bench/member.c: each opens"
        " a UDP socket, the covered call at which a process joins its group, then waits);"
        " `faultctl -g G enable`"
        " and `disable` alternately, %d times, wall time of each faultctl run (start-up"
        " included). faultctl journals the change, checks it against one member's policy"
        " (rebuilt from that member's state file and the journal) and moves the group's"
        " change counter, which each member reads at its next call: nothing is sent to any"
        " member. Members are that small program rather than idle Python interpreters, so"
        " that 4,096 of them fit in memory; faultctl never waits on a member, so what the"
        " members run does not enter the figure. Beside it,"
        " %s" % (runs, "libfiu's `fiu-ctrl -c 'enable name=posix/io/net/connect' PID...`"
                     " (and disable) on N `fiu-run -x sleep` processes, the same way (3"
                     " runs at 4,096)." if fiu else "nothing: fiu-utils is not installed."))
    say("")
    say("| processes | faultctl median | worst | fiu-ctrl median | worst |")
    say("|---|---|---|---|---|")
    cfg = conf("ctl.conf", ['{ name = "x"; action = "blackhole"; match = { to = '
                            '"127.99.1.2/32"; }; enabled = false; }'])
    med = {}
    for n in (1, 8, 32) if SMOKE else (1, 32, 256, 4096):
        group = "bench%d" % n
        ps = [subprocess.Popen([MEMBER], env=shim_env(cfg, {"FAULTNET_GROUP": group}))
              for _ in range(n)]
        procs.extend(ps)
        for _ in range(1200):
            if len([f for f in os.listdir(RUNDIR) if f.startswith(group + ".")
                    and f.endswith(".mem")]) >= n:
                break
            time.sleep(0.05)
        e = dict(os.environ, FAULTNET_RUNDIR=RUNDIR)
        ours = timed(runs, lambda i: [CTL, "-g", group, "enable" if i % 2 == 0 else "disable",
                                      "x"], e)
        for p in ps:
            p.kill()
        for p in ps:
            p.wait()
        theirs = fiu_flips(n, min(runs, 3) if n > 256 else runs) if fiu else None
        med[n] = statistics.median(ours)
        say("| %d | %.1f ms | %.1f ms | %s |" % (
            n, med[n], max(ours),
            "%.1f ms | %.1f ms" % (statistics.median(theirs), max(theirs)) if theirs else "- | -"))
    say("")
    # The floor under any faultctl run: starting a program at all.
    floor = statistics.median(timed(runs, lambda i: ["/bin/true"], plain_env()))
    if not SMOKE:
        say("Target: under 5 ms for 256 processes, under 20 ms for 4,096: %s and %s. Starting"
            " a program on this machine (`/bin/true`, timed the same way) takes %.1f ms: no"
            " faultctl run can take less." % ("met" if med[256] < 5 else "missed",
                                              "met" if med[4096] < 20 else "missed", floor))
    else:
        say("Starting a program on this machine (`/bin/true`, timed the same way) takes %.1f ms."
            % floor)
    say("")


def timed(runs, argv_of, env):
    """Wall times in ms of runs commands argv_of(i), each checked."""
    times = []
    for i in range(runs):
        t0 = time.monotonic()
        subprocess.run(argv_of(i), env=env, check=True, capture_output=True)
        times.append((time.monotonic() - t0) * 1000)
    return times


def fiu_flips(n, runs):
    """fiu-ctrl's flips on n `fiu-run -x sleep` processes, their control
    pipes in the bench's own directory."""
    base = os.path.join(TMP, "fiu")
    ps = [subprocess.Popen(["fiu-run", "-x", "-f", base, "sleep", "600"], env=plain_env())
          for _ in range(n)]
    procs.extend(ps)
    pids = [str(p.pid) for p in ps]
    for _ in range(1200):
        if all(os.path.exists("%s-%s.in" % (base, pid)) for pid in pids):
            break
        time.sleep(0.05)
    times = timed(runs, lambda i: ["fiu-ctrl", "-f", base, "-c", "%s name=posix/io/net/connect"
                                   % ("enable" if i % 2 == 0 else "disable")] + pids,
                  plain_env())
    for p in ps:
        p.terminate()
    for p in ps:
        p.wait()
    return times


# ---- 9. the kernel-side backend ---------------------------------------------

def connect_us(prefix, ip, n):
    """Median microseconds of n blocking connects to ip:PORT, run through
    prefix (a faultctl run, or nothing); and the errno they met."""
    r = subprocess.run(prefix + [os.path.join(BIN, "stream"), "connect", ip, str(PORT), str(n), "0"],
                       env=plain_env({"FAULTNET_RUNDIR": RUNDIR}), capture_output=True, text=True,
                       timeout=300)
    rows = [x.split() for x in r.stdout.splitlines() if x.strip()]
    if r.returncode or len(rows) != n:
        raise RuntimeError("connects through %s: %s" % (prefix, r.stderr[-500:]))
    return statistics.median(float(x[0]) for x in rows), rows[0][1]


def backend():
    say("## 9. The kernel-side backend: what a connect costs")
    say("")
    if os.geteuid() != 0:
        say("Not measured: `faultctl run --backend=bpf` needs root (CAP_BPF, CAP_NET_ADMIN).")
        say("")
        return
    n, runs = (50, 1) if SMOKE else (2000, 5)
    closed = "127.80.0.9"  # nothing listens there: the real refusal
    far = conf("far100.conf", far_rules(100))
    near = conf("near.conf", far_rules(99) + ['{ name = "near"; action = "refuse"; '
                                              'match = { to = "%s/32"; }; }' % SERVER_IP])
    shim = lambda c: [CTL, "run", "--config", c, "--"]
    bpf = lambda c: [CTL, "run", "--backend=bpf", "--config", c, "--"]
    cases = [("without faultnet, to the server", [], SERVER_IP),
             ("shim, 100 rules, none covers it", shim(far), SERVER_IP),
             ("bpf, 100 rules, none covers it", bpf(far), SERVER_IP),
             ("without faultnet, to a closed port (a real refusal)", [], closed),
             ("shim, a refuse rule covers it", shim(near), SERVER_IP),
             ("bpf, a refuse rule covers it", bpf(near), SERVER_IP)]
    say("Method: `stream connect` makes %d blocking TCP connects on loopback, one after another,"
        " each timed in the process; the median of each run, then the median of %d runs made"
        " in turn. The unmatched cases connect to the benchmark's server (the handshake"
        " completes); the matched ones meet `refuse`, compared with a connect to a port where"
        " nothing listens. Under the backend every packet of the run's cgroup also passes the"
        " cgroup_skb programs." % (n, runs))
    say("")
    say("| connect | median | errno | added |")
    say("|---|---|---|---|")
    got = {name: [] for name, _, _ in cases}
    err = {}
    for _ in range(runs):
        for name, prefix, ip in cases:
            us, e = connect_us(prefix, ip, n)
            got[name].append(us)
            err[name] = e
    base = {}
    for name, _, ip in cases:
        m = statistics.median(got[name])
        if name.startswith("without"):
            base[ip] = m
        ref = base[SERVER_IP] if "none covers" in name else base.get(closed, m)
        say("| %s | %.1f us | %s | %s |" % (name, m, err[name],
                                            "-" if name.startswith("without") else "%+.1f us" % (m - ref)))
    say("")


# ---- 11. many connections ----------------------------------------------------

CONC_PORT, HAPROXY_IP, HAPROXY_PORT = PORT + 20, "127.80.0.4", PORT + 21


def start_haproxy():
    """haproxy in TCP mode (nbthread 2) between the client and the conc
    server, as the issue names the peer; None when not installed."""
    if not shutil.which("haproxy"):
        return None
    cfg = os.path.join(TMP, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write("global\n    nbthread 2\n    maxconn 4096\n"
                "defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 60s\n"
                "    timeout server 60s\n"
                "listen relay\n    bind %s:%d\n    server s %s:%d\n"
                % (HAPROXY_IP, HAPROXY_PORT, SERVER_IP, CONC_PORT))
    p = subprocess.Popen(["haproxy", "-f", cfg, "-db"], env=plain_env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(p)
    for _ in range(50):
        try:
            socket.create_connection((HAPROXY_IP, HAPROXY_PORT), timeout=1).close()
            return p
        except OSError:
            time.sleep(0.1)
    return None


def conc_load(ip, port, env, c, secs):
    """(requests per second, p50 us, p99 us, worst gap ms) of `conc load`."""
    r = subprocess.run([os.path.join(BIN, "conc"), "load", ip, str(port), str(c), str(secs)],
                       env=env, capture_output=True, text=True, timeout=120 + secs)
    if r.returncode:
        raise RuntimeError("conc load %s:%d %d: %s" % (ip, port, c, r.stderr[-500:]))
    n, took, p50, p99, gap = (float(x) for x in r.stdout.split())
    return n / took, p50, p99, gap


def relay_ir(env, c, secs):
    """(requests, user-space instructions of the relay threads) of a
    callgrind run of `conc load` (every thread but the client's)."""
    for f in os.listdir(TMP):
        if f.startswith("cgr."):
            os.unlink(os.path.join(TMP, f))
    r = subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                        "--callgrind-out-file=" + os.path.join(TMP, "cgr"),
                        os.path.join(BIN, "conc"), "load", SERVER_IP, str(CONC_PORT), str(c),
                        str(secs)], env=env, capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise RuntimeError("conc load under callgrind: " + r.stderr[-500:])
    total = 0
    for f in os.listdir(TMP):
        if f.startswith("cgr") and not f.endswith("-01"):
            with open(os.path.join(TMP, f)) as fh:
                total += next((int(x.split()[1]) for x in fh
                               if x.startswith(("summary:", "totals:"))), 0)
    return int(r.stdout.split()[0]), total


def relay_ir_per_request(env, c):
    """The relay's user-space instructions per request at c connections:
    the difference of a short and a longer run, so that setting the
    connections up does not count."""
    (n1, i1), (n2, i2) = relay_ir(env, c, 1), relay_ir(env, c, 3)
    return (i2 - i1) / max(n2 - n1, 1)


def many_conns():
    say("## 11. Many concurrent keep-alive connections")
    say("")
    secs = 0.3 if SMOKE else 2
    rounds = 1 if SMOKE else 3
    sizes = (10, 100) if SMOKE else (10, 100, 1000)
    p = subprocess.Popen([os.path.join(BIN, "conc"), "serve", SERVER_IP, str(CONC_PORT)],
                         env=plain_env(), stdout=subprocess.PIPE, text=True)
    procs.append(p)
    p.stdout.readline()
    relay = conf("conc-relay.conf", ['{ name = "relay"; action = "bandwidth";'
                                     ' rate = 1099511627776L; match = { to = "%s/32"; }; }'
                                     % SERVER_IP])
    http = conf("conc-http.conf", ['{ name = "never"; action = "respond"; status = 503;'
                                   ' match = { to = "%s/32"; path = "/never"; }; }' % SERVER_IP])
    hap = start_haproxy()
    say("Method: `conc load` keeps C keep-alive HTTP/1.1 connections busy from one epoll"
        " thread for %s s, each sending its next GET as soon as its 64-byte answer is in, to"
        " `conc serve` (one epoll thread): direct, through faultnet's relay as bytes (a"
        " `bandwidth` rule of 1 TiB/s), through it with every request and answer parsed (an"
        " HTTP rule that forwards), and through %s. %d rounds, alternating; medians. Requests"
        " per second; latency of a request (send to whole answer) at the median and p99, and"
        " p99 added over direct; worst gap: the longest any connection waited between two of"
        " its answers in a run (a starved connection shows there). The client raises its own"
        " fd limit to the hard one; with the shim the relay's ends are fds of the same"
        " process. %d CPUs, shared by client, server and relay."
        % (secs, "haproxy %s in TCP mode (`nbthread 2`)" % haproxy_version() if hap
           else "no peer (haproxy is not installed: scripts/deps.sh bench installs it)",
           rounds, os.cpu_count() or 0))
    say("")
    paths = [("direct", SERVER_IP, CONC_PORT, plain_env()),
             ("faultnet relay, bytes", SERVER_IP, CONC_PORT, shim_env(relay)),
             ("faultnet relay, HTTP-parsed", SERVER_IP, CONC_PORT, shim_env(http))]
    if hap:
        paths.append(("haproxy (TCP, nbthread 2)", HAPROXY_IP, HAPROXY_PORT, plain_env()))
    say("| connections | path | requests/s | of direct | of haproxy | p50 | p99 | p99 added |"
        " worst gap |")
    say("|---|---|---|---|---|---|---|---|---|")
    verdict = {}
    for c in sizes:
        got = {name: [] for name, _, _, _ in paths}
        for r in range(rounds):
            for name, ip, port, env in paths[r % len(paths):] + paths[:r % len(paths)]:
                got[name].append(conc_load(ip, port, env, c, secs))
        med = {k: [statistics.median(x[i] for x in v) for i in range(3)] +
               [max(x[3] for x in v)] for k, v in got.items()}
        peer = "haproxy (TCP, nbthread 2)"
        for name, _, _, _ in paths:
            rps, p50, p99, gap = med[name]
            vs = ("%.2f" % paired([x[0] for x in got[name]], [x[0] for x in got[peer]])[0]
                  if hap else "-")
            say("| %d | %s | %.0f | %.2f | %s | %.0f us | %.0f us | %s | %.0f ms |"
                % (c, name, rps, rps / med["direct"][0], vs, p50, p99,
                   "" if name == "direct" else "%+.0f us" % (p99 - med["direct"][2]), gap))
        if hap:
            verdict[c] = (paired([x[0] for x in got["faultnet relay, bytes"]],
                                 [x[0] for x in got[peer]])[0],
                          max(med[k][3] for k in med if k.startswith("faultnet")))
    say("")
    if SMOKE:
        say("Not measured with --smoke: the relay's instructions per request at 1,000"
            " connections (callgrind, a full run only).")
    else:
        ir = {c: relay_ir_per_request(shim_env(relay), c) for c in (10, 1000)}
        say("The relay's own user-space instructions per request (callgrind, every thread"
            " but the client's, the difference of a 1 s and a 3 s run): %.0f at 10"
            " connections, %.0f at 1,000 (%.2fx). A round steps only the connections an"
            " event or a due timer concerns (preload/relay/relay_sched.c); a walk over all"
            " of them on each wake-up made it 1.28x here." % (ir[10], ir[1000],
                                                              ir[1000] / ir[10]))
        check_bound("relay instructions per request at 1,000 connections, per mille of 10's",
                    1000 * ir[1000] / ir[10], 1150)
        say("")
    if hap and 1000 in verdict:
        ratio, gap = verdict[1000]
        say("Target: at 1,000 connections, the relay's throughput at least 0.9 of haproxy's"
            " (the median of its ratios to haproxy in the same round): %s (%.2f); no"
            " connection starved (each answered at least once a second): %s (worst gap %.0f"
            " ms). The relay runs two threads once a process has 16 relayed connections and two"
            " CPUs (preload/relay/relay_shard.h), haproxy two."
            % ("met" if ratio >= 0.9 else "missed", ratio, "met" if gap < 1000 else "missed",
               gap))
        say("")


def haproxy_version():
    r = subprocess.run(["haproxy", "-v"], capture_output=True, text=True)
    words = r.stdout.split()
    return words[2].split("-")[0] if len(words) > 2 else ""


# ---- 6. start-up ----------------------------------------------------------

# Issue 42's targets: a start with 10 rules at most this many times the same
# command's without the shim (medians of alternating runs).
START_TARGETS = {"true": 1.15, "/usr/bin/python3 -c pass": 1.03}
# Runs each way: medians of 40 moved by 3% from one run of the same tree to
# the next here (a page fault costs more or less as the host reclaims
# memory), about the margin the targets leave; more runs hold them closer.
# With 200, `true`'s ratio moved by 0.03 (1.133 to 1.167) over four runs of
# one tree. 600 cut the sampling error of each median by sqrt(3) (to about
# half a hundredth of the ratio here); what the machine's drift between
# runs adds, no count of runs removes.
START_RUNS = {"true": 600, "/usr/bin/python3 -c pass": 200}


def fs_type(path):
    """The file system type of the mount that holds path (/proc/self/mounts)."""
    best, kind = "", "?"
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            mnt = parts[1].replace("\\040", " ")
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                best, kind = mnt, parts[2]
    return kind


def empty_preload():
    """A library with nothing in it, the floor any LD_PRELOAD pays (the
    loader opening and mapping one more object); None without a compiler."""
    src, lib = os.path.join(TMP, "empty.c"), os.path.join(TMP, "libempty.so")
    with open(src, "w") as f:
        f.write("int faultnet_bench_empty;\n")
    r = subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, src], capture_output=True)
    return lib if r.returncode == 0 else None


def startup():
    say("## 6. Start-up")
    say("")
    runs = 5 if SMOKE else 40  # a start in a big group
    cfg = conf("start.conf", far_rules(10))
    # The run directory on tmpfs as well, as XDG_RUNTIME_DIR gives it on a
    # systemd machine: the state file's creation and renames cost more on
    # a disk file system (journaled).
    shm = tempfile.mkdtemp(prefix="fn-bench-", dir="/dev/shm") \
        if fs_type("/dev/shm") == "tmpfs" else None
    empty = empty_preload()
    settle(cfg, [RUNDIR] + ([os.path.join(shm, "run")] if shm else []))
    say("Method: wall time of each command, run each way %s (10 rules loaded), alternating"
        " (each round begins one way further on); medians, with the interquartile range of the"
        " runs with the shim (the machine's"
        " noise). The verdict is on the bench's run directory (%s, on %s here); beside it, the"
        " same with the run directory on tmpfs (%s), and the floor any preload pays: an"
        " empty library in LD_PRELOAD. The policy file has settled (no change for %d s), so"
        " the starts find its compiled copy by the file's identity, as every start does once a"
        " policy is in use (core/compiled_file.c)."
        % (" and ".join("%d times for `%s`" % (5 if SMOKE else n, c)
                        for c, n in START_RUNS.items()),
           RUNDIR, fs_type(TMP), shm or "no tmpfs at /dev/shm: not measured",
           SETTLED_S))
    say("")
    say("| command | without | an empty preload | with faultnet | ratio | run directory on"
        " tmpfs | ratio | target | verdict |")
    say("|---|---|---|---|---|---|---|---|---|")
    envs = [("bare", plain_env()), ("shim", shim_env(cfg))]
    if empty:
        envs.append(("empty", plain_env({"LD_PRELOAD": empty})))
    if shm:
        envs.append(("shm", shim_env(cfg, {"FAULTNET_RUNDIR": os.path.join(shm, "run")})))
    for cmd in (["true"], ["/usr/bin/python3", "-c", "pass"]):
        t = {k: [] for k, _ in envs}
        for r in range(5 if SMOKE else START_RUNS[" ".join(cmd)]):
            for k, env in envs[r % len(envs):] + envs[:r % len(envs)]:
                t0 = time.monotonic()
                subprocess.run(cmd, env=env, check=True)
                t[k].append((time.monotonic() - t0) * 1000)
        m = {k: statistics.median(v) for k, v in t.items()}
        q = statistics.quantiles(t["shim"], n=4)
        target = START_TARGETS[" ".join(cmd)]
        ratio = m["shim"] / m["bare"]
        # Three decimals: the verdict is on the ratio itself, and a 1.153
        # shown as 1.15 read as met.
        say("| `%s` | %.2f ms | %s | %.2f ms (%.2f to %.2f) | %.3f | %s | %s | %.2f | %s |"
            % (" ".join(cmd), m["bare"],
               "%.2f ms (%.2f)" % (m["empty"], m["empty"] / m["bare"]) if empty else "-",
               m["shim"], q[0], q[2], ratio,
               "%.2f ms" % m["shm"] if shm else "-",
               "%.2f" % (m["shm"] / m["bare"]) if shm else "-", target,
               "met" if ratio <= target else "missed"))
    say("")
    if shm:
        shutil.rmtree(shm, ignore_errors=True)
    start_counts(cfg, empty)
    start_in_big_group(cfg, runs)


# core/compiled_file.c: a policy file unchanged for this long gives its
# compiled copy a second name, by which later starts find it.
SETTLED_S = 2


def settle(cfg, rundirs):
    """The state a policy in use is in: its copy made by a first start,
    then, once the file has settled, named by the file's identity."""
    settle_all([cfg], rundirs)


def settle_all(cfgs, rundirs):
    """settle() for each of cfgs, after one wait."""
    for cfg in cfgs:
        for d in rundirs:
            subprocess.run(["true"], env=shim_env(cfg, {"FAULTNET_RUNDIR": d}), check=True)
    time.sleep(SETTLED_S + 0.2)
    for cfg in cfgs:
        for d in rundirs:
            subprocess.run(["true"], env=shim_env(cfg, {"FAULTNET_RUNDIR": d}), check=True)
    for d in rundirs:
        if len(glob.glob(os.path.join(d, "policy-s-*.compiled"))) < len(cfgs):
            broken.append("start: no copy named by the policy file's identity in %s" % d)


# Issue 42: a start in a group of 10,000 live members costs at most this
# many times a start in an empty group (medians of alternating runs).
BIG_GROUP, BIG_GROUP_TARGET = 10000, 1.10


def hold_members(rundir, group, n):
    """A process that holds n live members' files of group in rundir as
    the shim does (core/rundir.h: an exclusive flock kept by a shared
    mapping after the fd is closed), under made-up pids; it prints "held"
    once all are, and lives until killed."""
    code = """import fcntl, mmap, os, sys
maps = []
for pid in range(1000000, 1000000 + int(sys.argv[3])):
    fd = os.open("%s/%s.%d.1.1.mem" % (sys.argv[1], sys.argv[2], pid), os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(fd, 4096)
    fcntl.flock(fd, fcntl.LOCK_EX)
    maps.append(mmap.mmap(fd, 4096))
    os.close(fd)
print("held", flush=True)
sys.stdin.read()
"""
    p = subprocess.Popen(["/usr/bin/python3", "-c", code, rundir, group, str(n)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    procs.append(p)
    if p.stdout.readline().strip() != "held":
        raise RuntimeError("the members' holder did not start")
    return p


def start_in_big_group(cfg, runs):
    """Wall time of a start that joins at once (JOINING) in a group of
    BIG_GROUP live members against one in an empty group, alternating; and
    the system calls of each."""
    n = 200 if SMOKE else BIG_GROUP
    rundir = os.path.join(TMP, "bigrun")
    os.mkdir(rundir, 0o700)
    holder = hold_members(rundir, "big", n)
    # A start sweeps the run directory for dead members at most every 10 s
    # (its stamp, .sweep): marked now, no start measured here sweeps.
    sweep_marked({"FAULTNET_RUNDIR": rundir})
    envs = {g: shim_env(cfg, {"FAULTNET_RUNDIR": rundir, "FAULTNET_GROUP": g})
            for g in ("big", "empty")}
    times = {"big": [], "empty": []}
    for _ in range(runs):
        for g in ("empty", "big"):
            t0 = time.monotonic()
            subprocess.run(JOINING, env=envs[g], check=True, stdout=subprocess.DEVNULL)
            times[g].append((time.monotonic() - t0) * 1000)
    med = {g: statistics.median(v) for g, v in times.items()}
    ratio = med["big"] / med["empty"]
    calls = {}
    if shutil.which("strace"):
        sweep_marked({"FAULTNET_RUNDIR": rundir})
        trace = os.path.join(TMP, "big.strace")
        calls = {g: len(start_syscalls(envs[g], trace, JOINING)) for g in ("empty", "big")}
    holder.stdin.close()
    holder.wait()
    say("A start in a big group: `%s` joining a group of %d live members (files held"
        " locked by another process, as members hold theirs) took %.2f ms, joining an empty"
        " group %.2f ms (%d runs each, alternating; medians): %.2f; target at most %.2f: %s.%s"
        % (" ".join(JOINING), n, med["big"], med["empty"], runs, ratio, BIG_GROUP_TARGET,
           "met" if ratio <= BIG_GROUP_TARGET else "missed",
           " System calls of each start: %d and %d." % (calls["big"], calls["empty"])
           if calls else ""))
    say("")
    if calls:
        check_bound("start: system calls added by a group of %d members" % n,
                    calls["big"] - calls["empty"], 10)


# A command whose first covered call comes at once (its lookup): it joins
# its group there, as every start did before the join waited for it.
JOINING = ["getent", "ahosts", "localhost"]


def start_syscalls(env, trace, argv=("/usr/bin/true",)):
    """System calls of a start of argv (strace -f, every thread), its trace
    kept in trace."""
    subprocess.run(["strace", "-f", "-qq", "-o", trace] + list(argv), env=env, check=True,
                   capture_output=True, timeout=60)
    with open(trace) as f:
        return [line for line in f if "(" in line and "+++" not in line]


def call_name(line):
    return line.split("(")[0].split()[-1]


def start_faults(env, argv=("/usr/bin/true",), runs=9):
    """The page faults of a start of argv (the child's ru_minflt): the
    median of runs, as a fault more or less comes and goes with where the
    kernel placed the mappings. Each page a start touches first is one, and
    in a virtual machine one costs about as much as 10,000 instructions:
    most of what a start of true adds under the shim, where the
    instructions are a few tens of microseconds."""
    counts = []
    for _ in range(runs):
        p = subprocess.Popen(list(argv), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        counts.append(os.wait4(p.pid, 0)[2].ru_minflt)
        p.returncode = 0
    return sorted(counts)[len(counts) // 2]


def start_counts(cfg, empty):
    """The figures noise cannot move: the system calls and user-space
    instructions a start of true adds under the shim (10 rules)."""
    if not shutil.which("strace"):
        say("System calls of a start: not counted (strace is not installed).")
        say("")
        return
    trace = os.path.join(TMP, "start.strace")
    plain = start_syscalls(plain_env(), trace)
    bare = len(plain)
    calls = start_syscalls(shim_env(cfg), trace)
    instr = [callgrind_threads(env, ["/usr/bin/true"]) for env in (plain_env(), shim_env(cfg))]
    # The shim alone, no policy: what loading it costs (ld.so mapping and
    # binding it, the constructor's lookups), apart from any policy's.
    alone = callgrind_threads(plain_env({"LD_PRELOAD": LIB, "FAULTNET_RUNDIR": RUNDIR}),
                              ["/usr/bin/true"]) - instr[0]
    by = {}
    for c, n in [(c, 1) for c in calls] + [(c, -1) for c in plain]:
        by[call_name(c)] = by.get(call_name(c), 0) + n
    top = ", ".join("%s %+d" % kv for kv in sorted(by.items(), key=lambda kv: -kv[1])[:8])
    say("What a start of `/usr/bin/true` adds, as counts (the run directory exists, 10 rules):"
        " %d system calls without the shim, %d with it (%+d; strace -f; the bound this run"
        " keeps: under %d added, %s); %d user-space instructions without the"
        " shim, %d with it (%+d; callgrind, every thread). The calls added, by name, most"
        " first: %s. `true` makes no covered call, so it never joins its group: it looks"
        " at its policy file (one stat), reads its"
        " compiled copy by the file's identity and builds nothing."
        % (bare, len(calls), len(calls) - bare, START_TRUE_CALLS,
           "kept" if len(calls) - bare < START_TRUE_CALLS else "broken",
           instr[0], instr[1], instr[1] - instr[0], top))
    say("")
    faults = [start_faults(env) for env in (plain_env(), shim_env(cfg))]
    floor = start_faults(plain_env({"LD_PRELOAD": empty})) if empty else None
    say("Page faults of that start (the child's minor faults, medians of 9): %d without the"
        " shim, %d with it (%+d; the bound this run keeps: under %d added, %s)%s. In a virtual"
        " machine each costs about as much as 10,000 instructions: they, not the"
        " instructions, are most of the time a start adds."
        % (faults[0], faults[1], faults[1] - faults[0], START_TRUE_FAULTS,
           "kept" if faults[1] - faults[0] < START_TRUE_FAULTS else "broken",
           "; an empty library in LD_PRELOAD: %d (%+d)" % (floor, floor - faults[0])
           if floor is not None else ""))
    say("")
    check_bound("start: page faults a start of true adds (10 rules)", faults[1] - faults[0],
                START_TRUE_FAULTS)
    start_phases(cfg, instr[1] - instr[0])
    jcalls = start_joining(cfg, trace)
    # The policy file is named once by a start: a stat, which finds its
    # copy by the file's identity (a tree before asked a statfs besides,
    # whether the file system keeps the identity, which only the copy's
    # naming needs; before that it opened and read the file, whose size
    # came from the fstat of the open file; and before that it had a stat
    # of the file besides its open and a refused mkdir).
    check_bound("start: calls naming the policy file, in the start that names it most",
                max(sum(('"%s"' % cfg) in c for c in cs) for cs in (calls, jcalls)), 2)
    check_bound("start: opens of the policy file (its copy found by the file's identity)",
                sum(('"%s"' % cfg) in c and "open" in c for c in calls + jcalls), 1)
    check_bound("start: mkdir of a run directory that exists",
                sum(call_name(c) == "mkdir" for c in calls + jcalls), 1)
    # A group that never changed has no journal: its counter (0) says so,
    # where every start tried to open it.
    check_bound("start: opens of the journal of a group with no change",
                sum(".journal" in c for c in jcalls), 1)
    # The head, the rule index and the first 16 rules' slots side by side,
    # given blocks in the one write that makes the file; before, a page per
    # rule's slot (placed by its name's hash: 13 calls for 10 rules), and
    # before that every page the slots' 64 probes span (75 fallocate calls,
    # 198 calls in all: 168 added).
    check_bound("start: calls giving the state file's pages blocks (10 rules)",
                sum(call_name(c) in ("fallocate", "pwrite64") for c in jcalls), 3)
    check_bound("start: system calls a start of true adds (10 rules)", len(calls) - bare,
                START_TRUE_CALLS)
    say("The shim with no policy adds %d instructions to a start of `true` (callgrind; the"
        " bound this run keeps: under %d, %s)."
        % (alone, START_ALONE_INSTR, "kept" if alone < START_ALONE_INSTR else "broken"))
    say("")
    check_bound("start: instructions the shim adds to true with no policy", alone,
                START_ALONE_INSTR)
    # The starts above find the policy compiled in the run directory
    # (core/compiled.c), as every start after the first of a policy's text
    # does (valgrind's own launcher, under the shim too, is the first here).
    # A policy that cannot be kept compiled (an @include) shows the parse
    # every start made before.
    inc = os.path.join(TMP, "start-inc.conf")
    with open(inc, "w") as f:
        f.write('@include "%s"\n' % os.path.basename(cfg))
    parsed = callgrind_threads(shim_env(inc), ["/usr/bin/true"]) - instr[0]
    kept = [f for f in os.listdir(RUNDIR)
            if f.endswith(".compiled") and not f.startswith("policy-s-")]
    say("Those starts find the policy compiled in the run directory (core/compiled.c; %d"
        " file%s kept there), as every start after the first of a policy's text does: %d"
        " instructions added (the bound this run keeps: under %d, %s). The same rules behind"
        " an `@include`, which is never kept compiled, are parsed with libconfig at every"
        " start, as every policy was before: %d added."
        % (len(kept), "" if len(kept) == 1 else "s", instr[1] - instr[0], START_CACHED_INSTR,
           "kept" if instr[1] - instr[0] < START_CACHED_INSTR else "broken", parsed))
    say("")
    check_bound("start: instructions a start of true adds (10 rules, compiled copy found)",
                instr[1] - instr[0], START_CACHED_INSTR)
    check_bound("start: the policy kept compiled in the run directory (files missing)",
                1 - len(kept), 1)


def start_joining(cfg, trace):
    """What a start that joins at once adds: `getent ahosts localhost`,
    whose lookup is its first covered call. Its trace's calls."""
    plain = start_syscalls(plain_env(), trace, JOINING)
    # One join first: it sweeps the run directory (at most every 10 s, of
    # the earlier sections' dead members), which is not a start's cost.
    subprocess.run(JOINING, env=shim_env(cfg), check=True, capture_output=True)
    calls = start_syscalls(shim_env(cfg), trace, JOINING)
    instr = [callgrind_threads(env, JOINING) for env in (plain_env(), shim_env(cfg))]
    added = len(calls) - len(plain)
    say("A start whose first call is covered joins its group there: `%s` (its lookup) adds"
        " %d system calls (the bound this run keeps: under %d, %s) and %d user-space"
        " instructions: the policy built from its compiled copy, the group's counter"
        " mapped, the state file made (%d calls give its"
        " pages their blocks, a write of zeros or fallocate before a page is written), all"
        " of what every start did before the join waited for the first covered call."
        % (" ".join(JOINING), added, START_ADDED_CALLS,
           "kept" if added < START_ADDED_CALLS else "broken", instr[1] - instr[0],
           sum(call_name(c) in ("fallocate", "pwrite64") for c in calls)))
    say("")
    check_bound("start and join: system calls `getent ahosts localhost` adds (10 rules)",
                added, START_ADDED_CALLS)
    return calls


# Where a start's added instructions go: the shim's steps before main,
# inclusive (callgrind_annotate), by the function that does each.
START_PHASES = (("check_policy", "the policy file looked at and its compiled copy read"),
                ("fn_compiled_build_id", "of which the shim's build-id found"),
                ("fn_control_check", "the group's variables and run directory"),
                ("fn_libc_resolve", "libc's functions looked up (dlsym)"))


def start_phases(cfg, added):
    if not shutil.which("callgrind_annotate"):
        say("Where they go: not said (callgrind_annotate is not installed).")
        say("")
        return
    out = os.path.join(TMP, "cgstart")
    subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=no",
                    "--callgrind-out-file=" + out, "/usr/bin/true"], env=shim_env(cfg),
                   check=True, capture_output=True, timeout=300)
    r = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
                       capture_output=True, text=True, check=True, timeout=300)
    got = {}
    # "65,118 ( 8.63%)  /path/file.c:function [object]"
    for m in re.finditer(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+\S+:(\w+)\S* \[\S*libfaultnet",
                         r.stdout, re.M):
        count = int(m.group(1).replace(",", ""))
        got[m.group(2)] = max(got.get(m.group(2), 0), count)
    shown = ["%s %d" % (what, got[fn]) for fn, what in START_PHASES if fn in got]
    rest = added - sum(got.get(fn, 0) for fn in ("check_policy", "fn_control_check",
                                                  "fn_libc_resolve"))
    say("Where the added instructions go (callgrind, inclusive): %s; the rest, %d, mostly the"
        " dynamic loader's (the shim mapped and relocated, the constructor's first calls"
        " bound, every object's symbols looked up past the shim's hooks first)." % ("; ".join(shown), rest))
    say("")


# 168 added on the tree before (issue 42); 98 after the state file's pages,
# the command line and the leftover's unlink; 86 without libresolv (its
# open, mappings and protections at every start); 75 in the bench run of
# b994ac9; 62 with the policy file read once and the state file's rule
# slots side by side (one write of zeros where there were 13).
START_ADDED_CALLS = 72
# A start that does not join (true): the policy file read, its compiled
# copy and the run directory looked at, the inherited fds listed: 31 in the
# first bench run of the join at the first covered call.
START_TRUE_CALLS = 40
# Page faults a start of true adds: 38 when the start's variables were
# scattered over eleven pages of .bss and it formatted paths with printf;
# 17 to 21 once they share the page the loader writes anyway
# (FN_START_DATA), as where the kernel places the mappings moves a page
# boundary or two; 15 to 17 once no 8 KiB buffer sits in the frames every
# start runs through, the start's memory block has a page of its own and
# the code every start runs lies in one stretch (FN_START_TEXT).
START_TRUE_FAULTS = 20
# The shim loaded with no policy added 186k instructions to true (issue 42:
# libresolv mapped, ~145 imports bound at load, 37 dlsym at start); about
# 53k once bound lazily, without libresolv, 24 dlsym at start.
START_ALONE_INSTR = 70000
# A start of true with 10 rules added 629k instructions (libconfig loaded
# and the file parsed at every start); about 175k once later starts rebuild
# the policy from its compiled copy and the shim binds lazily.
START_CACHED_INSTR = 250000


# ---- 10. HTTP/2: one connection, many streams -----------------------------

H2_IP, H2_PORT, H2X_IP, H2X_PORT = "127.80.0.1", 7410, "127.80.0.6", 7411


def wait_listening(ip, port):
    for _ in range(100):
        try:
            socket.create_connection((ip, port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def h2load(ip, port, n, argv_prefix=(), env=None):
    """Requests per second of h2load over one clear-text (prior knowledge)
    connection with 32 streams at once, and the run's whole output."""
    r = subprocess.run(list(argv_prefix) + ["h2load", "-n", str(n), "-c", "1", "-m", "32",
                                            "http://%s:%d/index.html" % (ip, port)],
                       capture_output=True, text=True, timeout=300, env=env or plain_env())
    rate = None
    for line in r.stdout.splitlines():
        if line.startswith("finished in") and "req/s" in line:
            rate = float(line.split(",")[1].split()[0])
        if line.startswith("requests:") and " 0 failed" not in line:
            raise RuntimeError("h2load: " + line)
    if rate is None:
        raise RuntimeError("h2load gave no rate: " + r.stdout[-400:] + r.stderr[-400:])
    return rate, r.stdout + r.stderr


def h2_carried(stats):
    """What faultnet did with the h2 connection, from run --stats --json:
    (h2 connections its HTTP/2 engine carried, connections passed through
    as bytes because they were not HTTP/1.x, requests counted and let
    through: the "http" records', one per method, Host and path)."""
    import json
    h2 = not_http = forwarded = 0
    for line in stats.splitlines():
        if not line.startswith("{"):
            continue
        rec = json.loads(line)
        if rec.get("type") == "h2":
            h2 += int(rec.get("connections", 0))
        elif rec.get("type") == "parser":
            not_http += int(rec.get("not_http", 0))
        elif rec.get("type") == "http":
            forwarded += int(rec.get("untouched", 0))
    return h2, not_http, forwarded


def h2_streams():
    say("## 10. HTTP/2: requests per second over one connection with many streams")
    say("")
    missing = [t for t in ("h2load", "nghttpd", "nghttpx") if not shutil.which(t)]
    if missing:
        say("Skipped: %s not installed (Debian's nghttp2-client, nghttp2-server and"
            " nghttp2-proxy; `scripts/deps.sh bench` installs them)." % ", ".join(missing))
        say("")
        return
    n = 500 if SMOKE else 20000
    rounds = 1 if SMOKE else 15  # a run takes a fraction of a second: rounds are cheap
    www = os.path.join(TMP, "h2www")
    os.mkdir(www)
    with open(os.path.join(www, "index.html"), "w") as f:
        f.write("x" * 64)
    start_peer(["nghttpd", "--no-tls", "-a", H2_IP, "-d", www, str(H2_PORT)])
    start_peer(["nghttpx", "--conf=/dev/null", "--errorlog-file=/dev/null", "--single-process",
                "-f", "%s,%d;no-tls" % (H2X_IP, H2X_PORT),
                "-b", "%s,%d;;proto=h2" % (H2_IP, H2_PORT)])
    if not wait_listening(H2_IP, H2_PORT) or not wait_listening(H2X_IP, H2X_PORT):
        say("Skipped: nghttpd or nghttpx did not start listening.")
        say("")
        return
    fwd = conf("h2-forward.conf", ['{ name = "never"; action = "respond"; status = 503;'
                                   ' match = { to = "%s/32"; port = %d; path = "/never"; }; }'
                                   % (H2_IP, H2_PORT)])
    say("Method: `h2load -n %d -c 1 -m 32` (one clear-text HTTP/2 connection, prior knowledge,"
        " 32 streams at once, 64-byte answers from nghttpd): directly; through faultnet"
        " (`faultctl run` with an HTTP rule covering the server that forwards every request: a"
        " `respond` rule on a path never requested); and through nghttpx as an h2 relay (one"
        " process, h2 to nghttpd behind it); %d rounds, medians, and the median of each"
        " round's faultnet/nghttpx ratio." % (n, rounds))
    say("")
    got = {"direct": [], "faultnet": [], "nghttpx": []}
    carried = passed = seen = 0
    ctl = [CTL, "run", "--stats", "--json", "--config", fwd, "--"]
    for _ in range(rounds):
        got["direct"].append(h2load(H2_IP, H2_PORT, n)[0])
        rate, out = h2load(H2_IP, H2_PORT, n, ctl, plain_env({"FAULTNET_RUNDIR": RUNDIR}))
        got["faultnet"].append(rate)
        c, p, f = h2_carried(out)
        carried, passed, seen = carried + c, passed + p, seen + f
        got["nghttpx"].append(h2load(H2X_IP, H2X_PORT, n)[0])
    med = {k: statistics.median(v) for k, v in got.items()}
    # The engine's figure only when it carried every run's connection and
    # every stream went through the rules and on to the server (forwarded).
    engine = carried >= rounds and seen >= n * rounds
    label = ("through faultnet (its HTTP/2 engine)" if engine else
             "through faultnet, **passed through as bytes** (not its HTTP/2 engine)")
    say("| path | requests/s | of direct |")
    say("|---|---|---|")
    say("| direct | %.0f | |" % med["direct"])
    say("| %s | %.0f | %.2f |" % (label, med["faultnet"], med["faultnet"] / med["direct"]))
    say("| through nghttpx | %.0f | %.2f |" % (med["nghttpx"], med["nghttpx"] / med["direct"]))
    say("")
    ratio, lo, hi = paired(got["faultnet"], got["nghttpx"])
    if engine:
        say("faultnet carried %d HTTP/2 connections in its engine (the h2 record) and forwarded"
            " %d requests, every stream of the runs (the http records)." % (carried, seen))
        say("faultnet against nghttpx, the median of the rounds' ratios: %.2f (quartiles %.2f to"
            " %.2f); target: 0.9 or more: %s." % (ratio, lo, hi, "met" if ratio >= 0.9 else
                                                  "missed"))
    else:
        say("faultnet/nghttpx: %.2f (quartiles %.2f to %.2f), **not judged**: faultctl's h2"
            " record counted %d HTTP/2 connections carried by the engine (of %d runs), its"
            " parser record %d connections relayed untouched as not HTTP/1.x (`not_http`), and"
            " forwarded %d of the %d streams as requests, so the faultnet figure is not the"
            " HTTP/2 engine's (HTTP/2 passed through as bytes when not_http counts it)."
            % (ratio, lo, hi, carried, rounds, passed, seen, n * rounds))
    say("")



# ---- 12. HTTPS: TLS terminated, against TLS-terminating relays ----------------

TLS_IP, TLS_PORT = "127.80.0.7", PORT + 30  # the loopback HTTPS server (haproxy)
STUNNEL_IP, STUNNEL_PORT = "127.80.0.8", PORT + 31  # and PORT + 32, its inner hop
SOCAT_TLS_IP, SOCAT_TLS_PORT = "127.80.0.9", PORT + 33
TLS_NAME = "hs.bench.test"


def tls_files():
    """A CA of the bench's and a leaf for *.bench.test it signed: the
    server's certificate, and the peers' (as a relay's leaf would be).
    Returns (CA file, leaf and key in one PEM)."""
    d = os.path.join(TMP, "tls")
    os.mkdir(d)
    f = {k: os.path.join(d, k) for k in ("ca.key", "ca.pem", "leaf.key", "leaf.csr",
                                         "leaf.pem", "ext", "both.pem")}
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    subprocess.run(["openssl", "req", "-x509"] + ec + ["-keyout", f["ca.key"], "-out",
                    f["ca.pem"], "-days", "2", "-subj", "/CN=bench CA", "-addext",
                    "basicConstraints=critical,CA:TRUE", "-addext",
                    "keyUsage=critical,keyCertSign"], check=True, capture_output=True)
    with open(f["ext"], "w") as fh:
        fh.write("subjectAltName=DNS:*.bench.test\nextendedKeyUsage=serverAuth\n")
    subprocess.run(["openssl", "req"] + ec + ["-keyout", f["leaf.key"], "-out", f["leaf.csr"],
                    "-subj", "/CN=*.bench.test"], check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", f["leaf.csr"], "-CA", f["ca.pem"],
                    "-CAkey", f["ca.key"], "-CAcreateserial", "-out", f["leaf.pem"], "-days",
                    "2", "-extfile", f["ext"]], check=True, capture_output=True)
    with open(f["both.pem"], "w") as out:
        for k in ("leaf.pem", "leaf.key"):
            with open(f[k]) as fh:
                out.write(fh.read())
    return f["ca.pem"], f["both.pem"]


def start_tls_peers(ca, pem):
    """The HTTPS server (haproxy answering 200 "ok" to every request, one
    thread) and the relays faultnet is measured against, each terminating
    the client's TLS with the same leaf and re-encrypting to that server,
    verified against the bench's CA: stunnel4 (a server service whose
    plaintext goes to a client service of the same process: stunnel's
    services are TLS on one side only) and socat's openssl mode (a process
    forked per connection). Returns [(label, ip, port, pid)] of the peers
    there."""
    cfg = os.path.join(TMP, "tls-haproxy.cfg")
    with open(cfg, "w") as f:
        f.write("global\n    nbthread 1\n    maxconn 4096\n"
                "defaults\n    mode http\n    timeout connect 5s\n    timeout client 60s\n"
                "    timeout server 60s\n    timeout http-keep-alive 60s\n"
                "frontend https\n    bind %s:%d ssl crt %s alpn http/1.1\n"
                "    http-request return status 200 content-type text/plain string ok\n"
                % (TLS_IP, TLS_PORT, pem))
    procs.append(subprocess.Popen(["haproxy", "-f", cfg, "-db"], env=plain_env(),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    if not wait_listening(TLS_IP, TLS_PORT):
        raise RuntimeError("the HTTPS server (haproxy) did not start")
    peers = []
    stunnel = shutil.which("stunnel4") or shutil.which("stunnel")
    if stunnel:
        conf_path = os.path.join(TMP, "stunnel.conf")
        with open(conf_path, "w") as f:
            f.write("foreground = yes\npid =\nsyslog = no\ndebug = 0\noutput = /dev/null\n"
                    "[in]\naccept = %s:%d\ncert = %s\nconnect = %s:%d\nTIMEOUTclose = 0\n"
                    "[out]\nclient = yes\naccept = %s:%d\nconnect = %s:%d\nverifyChain = yes\n"
                    "CAfile = %s\ncheckHost = %s\nsni = %s\nTIMEOUTclose = 0\n"
                    % (STUNNEL_IP, STUNNEL_PORT, pem, STUNNEL_IP, STUNNEL_PORT + 1,
                       STUNNEL_IP, STUNNEL_PORT + 1, TLS_IP, TLS_PORT, ca, TLS_NAME, TLS_NAME))
        procs.append(subprocess.Popen([stunnel, conf_path], env=plain_env(),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        if wait_listening(STUNNEL_IP, STUNNEL_PORT):
            peers.append(("stunnel4", STUNNEL_IP, STUNNEL_PORT, procs[-1].pid))
    if shutil.which("socat"):  # the CPU of its forked children: reaped, so counted
        procs.append(subprocess.Popen(
            ["socat", "OPENSSL-LISTEN:%d,bind=%s,reuseaddr,fork,cert=%s,verify=0"
             % (SOCAT_TLS_PORT, SOCAT_TLS_IP, pem),
             "OPENSSL:%s:%d,cafile=%s,commonname=%s,snihost=%s"
             % (TLS_IP, TLS_PORT, ca, TLS_NAME, TLS_NAME)],
            env=plain_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        if wait_listening(SOCAT_TLS_IP, SOCAT_TLS_PORT):
            peers.append(("socat (openssl)", SOCAT_TLS_IP, SOCAT_TLS_PORT, procs[-1].pid))
    return peers


def tlsload(mode, ip, port, n, ca, env, name=TLS_NAME, relay_pid=None, cpu=None):
    """Seconds `tlsload MODE` took for n (connections, or requests), after
    its one untimed connection; with cpu a list, the CPU seconds the client
    used for them (with the shim, its relay thread's too) and the relay
    process relay_pid's are appended to it."""
    c0 = cpu_seconds(relay_pid)
    r = subprocess.run([os.path.join(BIN, "tlsload"), mode, ip, str(port), name, str(n), ca],
                       env=env, capture_output=True, text=True, timeout=300)
    if r.returncode:
        raise RuntimeError("tlsload %s %s:%d: %s" % (mode, ip, port, r.stderr[-400:]))
    took, used = (float(x) for x in r.stdout.split()[-2:])
    if cpu is not None:
        if relay_pid:
            time.sleep(0.2)  # socat's last children reaped
        cpu.append(used + cpu_seconds(relay_pid) - c0)
    return took


def tls_terminated(cfg, ca):
    """faultctl run --stats of tlsload's 5 connections (4 and its untimed
    one) under the rule: its tls record's terminated count."""
    e = plain_env({"FAULTNET_RUNDIR": RUNDIR})
    r = subprocess.run([CTL, "run", "--stats", "--config", cfg, "--",
                        os.path.join(BIN, "tlsload"), "hs", TLS_IP, str(TLS_PORT), TLS_NAME,
                        "4", ca], env=e, capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    rec = {}
    for line in out.splitlines():
        w = line.split()
        if w and w[0] == "tls":
            rec = dict(kv.split("=", 1) for kv in w[1:] if "=" in kv)
    return int(rec.get("terminated", 0)), out


def tls_relay():
    say("## 12. HTTPS: TLS terminated and re-encrypted, against TLS-terminating relays")
    say("")
    if not shutil.which("haproxy"):
        say("Not measured: haproxy (the HTTPS server) is not installed (scripts/deps.sh bench).")
        say("")
        return
    ca, pem = tls_files()
    peers = start_tls_peers(ca, pem)
    cfg = conf("https-rule.conf", ['{ name = "never"; action = "respond"; status = 503;'
                                   ' match = { to = "%s/32"; port = %d; path = "/never"; }; }'
                                   % (TLS_IP, TLS_PORT)])
    n_hs = 20 if SMOKE else 200
    n_ka = 100 if SMOKE else 4000
    # The keep-alive ratio spreads by a quarter from round to round here
    # (quartiles 0.92 to 1.19): with 5 rounds its median moved from 1.04 to
    # 0.95 between two runs of one tree, against a target of 0.95. 15
    # rounds take its standard error from about 0.11 to 0.065.
    rounds = 1 if SMOKE else 15
    say("Method: `tlsload` (tests/bench/tlsload.c: the system's OpenSSL 3, verifying the"
        " server's chain against the bench's CA and its name, no session resumption, ALPN"
        " http/1.1) against a loopback HTTPS server (haproxy, one thread, answering every"
        " GET with a 200 of 2 bytes). *New connections*: %d one after another (socat's, a"
        " process forked each, a tenth of that), each a full"
        " TLS 1.3 handshake and one GET; *keep-alive*: %d GETs on one connection. Paths:"
        " direct; through faultnet, its relay terminating the client's TLS under an HTTP rule"
        " that answers nothing (a `respond` whose path never matches: every request parsed"
        " and forwarded) and re-encrypting to the server, which the client's own store judges"
        " through the trust hook; and through the peers, each a relay process terminating"
        " TLS with a leaf of the same CA and re-encrypting to the same server, verified: %s."
        " %d rounds, alternating (each round starts one path further on), medians; the"
        " verdict is the median of the rounds' ratios to the better peer (by median); %d CPUs."
        % (n_hs, n_ka, ", ".join(p[0] for p in peers) or "none installed", rounds,
           os.cpu_count() or 0))
    say("")
    done, out = tls_terminated(cfg, ca)
    if done < 5:
        say("**Not measured**: faultctl run --stats counted %d of 5 connections terminated"
            " (the relay did not terminate them: its figures would not be TLS's)." % done)
        say("")
        return
    rows = [("direct", TLS_IP, TLS_PORT, plain_env(), None),
            ("faultnet", TLS_IP, TLS_PORT, shim_env(cfg), None)]
    rows += [(label, ip, port, plain_env(), pid) for label, ip, port, pid in peers]
    got = {r[0]: ([], [], [], []) for r in rows}
    for r in range(rounds):
        for label, ip, port, env, pid in rows[r % len(rows):] + rows[:r % len(rows)]:
            g = got[label]
            # socat forks a process a connection: a tenth of the count
            # gives its rate as well, in a tenth of the time.
            k = max(10, n_hs // 10) if label.startswith("socat") else n_hs
            g[0].append(k / tlsload("hs", ip, port, k, ca, env, relay_pid=pid, cpu=g[2]))
            g[2][-1] *= n_hs / k  # CPU as for n_hs connections
            g[1].append(n_ka / tlsload("ka", ip, port, n_ka, ca, env, relay_pid=pid, cpu=g[3]))
    med = {k: tuple(statistics.median(x) for x in v) for k, v in got.items()}
    say("| path | new connections /s | of direct | CPU ms per connection | keep-alive requests"
        " /s | of direct | CPU µs per request |")
    say("|---|---|---|---|---|---|---|")
    d = med["direct"]
    for label, _, _, _, _ in rows:
        h, k, ch, ck = med[label]
        say("| %s | %.0f | %.2f | %.2f | %.0f | %.2f | %.1f |"
            % (label, h, h / d[0], ch * 1000 / n_hs, k, k / d[1], ck * 1e6 / n_ka))
    say("")
    say("CPU: the client's (with faultnet, its relay thread's too) and the relay process's"
        " (socat's forked children included), per connection or request; the server's is left"
        " out (the same for every path).")
    say("")
    say("faultctl run --stats before the runs: %d of 5 connections terminated by the relay"
        " (the tls record), so the faultnet row is TLS terminated, not passed through." % done)
    say("")
    if peers:
        names = [p[0] for p in peers]
        best = [max(names, key=lambda p: med[p][i]) for i in (0, 1)]
        hs, ka = (paired(got["faultnet"][i], got[best[i]][i]) for i in (0, 1))
        say("faultnet against the better peer (%s for new connections, %s for keep-alive), the"
            " median of the rounds' ratios: %.2f for new connections (quartiles %.2f to %.2f;"
            " target 0.9 or more: %s) and %.2f for keep-alive requests (%.2f to %.2f; target"
            " 0.95 or more: %s)."
            % ((best[0], best[1]) + hs + ("met" if hs[0] >= 0.9 else "missed",) + ka +
               ("met" if ka[0] >= 0.95 else "missed",)))
        say("")
        # The CPU each relay adds: faultnet's is the client's less the
        # direct client's; a peer's, its own process's.
        add = [(med["faultnet"][i] - d[i]) / n for i, n in ((2, n_hs), (3, n_ka))]
        peer = [(med[best[j]][i] - d[i]) / n for j, (i, n) in enumerate(((2, n_hs), (3, n_ka)))]
        say("What each relay adds in CPU (client and relay less the direct client): faultnet"
            " %.2f ms per connection against %.2f for %s, and %.1f µs per keep-alive request"
            " against %.1f for %s (%.2f and %.2f of the peer's). Where the rates differ more"
            " than the CPU, the difference is latency on the path of each connection or"
            " request, not work; the spread from round to round on this shared machine is in"
            " the quartiles above."
            % (add[0] * 1000, peer[0] * 1000, best[0], add[1] * 1e6, peer[1] * 1e6, best[1],
               add[0] / peer[0] if peer[0] > 0 else 0, add[1] / peer[1] if peer[1] > 0 else 0))
        say("")
        if hs[0] < 0.9 or ka[0] < 0.95:
            tls_why()
    tls_instructions(cfg, ca)
    tls_syscalls(cfg, ca)
    tls_first_costs(cfg, ca, n_hs // 2, 1 if SMOKE else 3)


def tls_why():
    """Why faultnet's TLS path may fall behind its peers, when it does."""
    say("Where the difference per connection comes from: stunnel4 resumes its TLS sessions"
        " with the server (its default; `openssl s_server -www` behind it says *Reused* from"
        " the second connection on), so after the first it neither receives, parses nor"
        " verifies the server's certificate, and the server signs nothing; faultnet's relay"
        " makes a full handshake with the server for every connection, whose chain the"
        " app's own store then judges (the trust hook), and in series with the app's: the"
        " server's handshake is done (all but its Finished) before the app's is answered,"
        " and the app's verdict on the leaf comes before the relay's Finished to the"
        " server, where stunnel4 answers the client first. socat forks a process per"
        " connection. Per keep-alive request, the relay thread waits on each side once and"
        " reads and writes each side's record once (the system calls below).")
    say("")


def tls_syscalls(cfg, ca):
    """System calls per keep-alive request of the client's process, every
    thread (strace -f -c), with and without faultnet: the relay thread's
    share of a request's round trip, as counts noise cannot move."""
    if not shutil.which("strace"):
        say("System calls per keep-alive request: not counted (strace is not installed).")
        say("")
        return
    n = 200 if SMOKE else 2000
    out = os.path.join(TMP, "tls.strace")

    def per_request(env):
        subprocess.run(["strace", "-f", "-c", "-o", out, os.path.join(BIN, "tlsload"), "ka",
                        TLS_IP, str(TLS_PORT), TLS_NAME, str(n), ca], env=env, check=True,
                       capture_output=True, timeout=300)
        calls = {}
        with open(out) as f:
            for line in f:
                w = line.split()
                if len(w) >= 5 and w[0][0].isdigit() and w[-1] != "total":
                    errs = int(w[4]) if len(w) == 6 else 0
                    calls[w[-1]] = (int(w[3]), errs)
        return {k: (c / n, e / n) for k, (c, e) in calls.items() if c >= n // 2}
    # A run directory of its own: the shared one holds the thousands of
    # member files earlier sections left, and the client's join sweeps them
    # when no process has for 10 s (4,600 fstat calls, once, counted as
    # 2.3 a request in one run).
    own = tempfile.mkdtemp(prefix="tls-run-", dir=TMP)
    plain, shim = per_request(plain_env()), per_request(shim_env(cfg, {"FAULTNET_RUNDIR": own}))
    fmt = lambda d: ", ".join("%s %.1f%s" % (k, c, " (%.1f failing)" % e if e >= 0.5 else "")
                              for k, (c, e) in sorted(d.items()))  # noqa: E731
    total = sum(c for c, _ in shim.values())
    say("System calls per keep-alive request (strace -f -c, every thread of the client's"
        " process, %d requests): without faultnet %s (%.1f); with it %s (%.1f): the relay"
        " thread's wait for each side (epoll), its read and its write of each side's record;"
        " a socket a read emptied is read again only once epoll reports input on it."
        % (n, fmt(plain), sum(c for c, _ in plain.values()), fmt(shim), total))
    say("")
    # 13.1 before the reads that found nothing went (9.1 after).
    check_bound("system calls per keep-alive HTTPS request through faultnet", total, 11)


def tls_instructions(cfg, ca):
    """Where faultnet's CPU per connection goes, as exact counts: the
    user-space instructions of the client's main thread and of its relay
    thread per connection (the difference of two runs, callgrind), beside
    the client's alone without the shim."""
    lo, hi = (2, 4) if SMOKE else (10, 30)

    def per_conn(env):
        counts = []
        for n in (lo, hi):
            for f in os.listdir(TMP):
                if f.startswith("cgtls"):
                    os.unlink(os.path.join(TMP, f))
            subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                            "--callgrind-out-file=" + os.path.join(TMP, "cgtls"),
                            os.path.join(BIN, "tlsload"), "hs", TLS_IP, str(TLS_PORT), TLS_NAME,
                            str(n), ca], env=env, check=True, capture_output=True, timeout=900)
            per = {}
            for f in sorted(os.listdir(TMP)):
                if f.startswith("cgtls-"):  # one file a thread
                    with open(os.path.join(TMP, f)) as fh:
                        per[f] = next((int(x.split()[1]) for x in fh
                                       if x.startswith(("summary:", "totals:"))), 0)
            counts.append([per[k] for k in sorted(per)])
        return [(b - a) / (hi - lo) for a, b in zip(*counts)]
    if not shutil.which("valgrind"):
        say("Instructions per connection: not counted (valgrind is not installed).")
        say("")
        return
    direct, shim = per_conn(plain_env()), per_conn(shim_env(cfg))
    relay = sum(shim[1:])
    say("Instructions per new connection (callgrind, user space, the difference of runs of %d"
        " and %d connections): the client alone %.2f M; under faultnet its main thread %.2f M"
        " (%+.2f M: the shim's connect and the trust hook, which verifies the server's chain"
        " in place of the leaf) and its relay thread %.2f M (the app's handshake answered, a"
        " handshake of its own with the server, both TLS 1.3 with ECDHE, and the requests"
        " parsed): faultnet adds %.2f M, %.1f times what the client's own handshake costs."
        % (lo, hi, direct[0] / 1e6, shim[0] / 1e6, (shim[0] - direct[0]) / 1e6, relay / 1e6,
           (shim[0] - direct[0] + relay) / 1e6, (shim[0] - direct[0] + relay) / direct[0]))
    say("")


def tls_first_costs(cfg, ca, n_hs, rounds):
    """What faultnet pays once: a leaf for a name it has not met (one
    signature), and the start of a process that makes one HTTPS request
    (OpenSSL loaded into its own namespace, the run's CA read)."""
    same, fresh = [], []
    for _ in range(rounds):
        same.append(tlsload("hs", TLS_IP, TLS_PORT, n_hs, ca, shim_env(cfg)) / n_hs)
        fresh.append(tlsload("names", TLS_IP, TLS_PORT, n_hs, ca, shim_env(cfg), "bench.test")
                     / n_hs)
    s_ms, f_ms = statistics.median(same) * 1000, statistics.median(fresh) * 1000
    say("A new name: %d connections each to a name of its own (c*.bench.test, each a leaf to"
        " make and sign and its server context to make) took %.3f ms each, against %.3f ms to one name (its leaf cached):"
        " **%+.3f ms** for the first handshake of a name (medians of %d rounds)."
        % (n_hs, f_ms, s_ms, f_ms - s_ms, rounds))
    say("")
    runs = 5 if SMOKE else 15
    e_rule = shim_env(cfg)
    times = {"true, without faultnet": [], "true, with the HTTPS rule": [],
             "one HTTPS request, direct": [], "one HTTPS request, through faultnet": []}
    for _ in range(runs):
        for label, argv, env in (
                ("true, without faultnet", ["true"], plain_env()),
                ("true, with the HTTPS rule", ["true"], e_rule),
                ("one HTTPS request, direct", [os.path.join(BIN, "tlsload"), "hs", TLS_IP,
                                               str(TLS_PORT), TLS_NAME, "1", ca], plain_env()),
                ("one HTTPS request, through faultnet",
                 [os.path.join(BIN, "tlsload"), "hs", TLS_IP, str(TLS_PORT), TLS_NAME, "1", ca],
                 e_rule)):
            t0 = time.monotonic()
            subprocess.run(argv, env=env, check=True, capture_output=True, timeout=60)
            times[label].append((time.monotonic() - t0) * 1000)
    say("Start-up with an HTTPS rule, wall time of a whole process (%d runs each,"
        " alternating; medians): OpenSSL is loaded into the relay's namespace and the run's"
        " CA read only when the first connection is terminated, so `true` pays only the"
        " shim's start, and a process making one HTTPS request pays the rest:" % runs)
    say("")
    say("| process | ms |")
    say("|---|---|")
    for label, v in times.items():
        say("| %s | %.2f |" % (label, statistics.median(v)))
    say("")

def main():
    t0 = time.monotonic()
    say("# faultnet benchmarks")
    say("")
    say("Written by `make bench` (tests/bench/bench.py) on %s, %s. Do not edit by hand."
        % (time.strftime("%Y-%m-%d"), os.uname().machine))
    say("Instruction counts are exact and repeatable; times are medians of runs made side"
        " by side on a shared machine, so compare the ratios.")
    say("")
    start_server()
    try:
        for section in (hot_path, lookups, throughput, accuracy, control, startup, http_cost,
                        name_lookups, backend, h2_streams, many_conns, tls_relay):
            if not ONLY or section.__name__ in ONLY:
                section()
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
    say("Whole run: %.0f s." % (time.monotonic() - t0))
    with open(OUT, "w") as f:
        f.write("\n".join(report) + "\n")
    shutil.rmtree(TMP, ignore_errors=True)
    if broken:
        sys.exit("bench: bounds broken:\n  " + "\n  ".join(broken))


if __name__ == "__main__":
    main()
