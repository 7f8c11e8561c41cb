#!/usr/bin/python3
"""check_layout.py - the layout rules of docs/ARCHITECTURE.md, checked on the
built objects so that they cannot rot:

1. Only the hooks (preload/hooks.c) may refer to a name that preload/hooks.list
   declares (the names the shim exports): any other reference would bind to the shim's own hook and
   re-enter it. Everything else calls libc through LIBC().
2. Calls go only downward between rooms: an object may use a symbol
   defined in its own room or in a room listed below it in ALLOWED.
3. Includes follow the same rule, so a header cannot smuggle an upward
   dependency in as an inline function.
4. A function pointer a lower room calls, installed from a room above it
   (an upward call the symbols cannot show), is one of UPCALLS.
5. Every source is in a room, and the room's text in ROOMS names it.
6. docs/ARCHITECTURE.md's rooms and calls blocks are what --print gives,
   and its locks table names every mutex of the code (file: variable).

usage: check_layout.py BUILD_DIR      (prints one line per violation)
       check_layout.py --print rooms|calls
       check_layout.py --write-doc    (rewrites the doc's two blocks)
"""
import os
import re
import subprocess
import sys
import textwrap

# The rooms, top to bottom: (room, rooms it may use besides itself, what it
# holds). The text names every source of the room (as NAME.c); the
# check fails on a source it does not name, and ARCHITECTURE.md's rooms
# block is this table printed (--print rooms).
ROOMS = [
    ("core", set(),
     "the policy model, shared by every program: addresses and CIDRs (addr.c), "
     "rules and first-match lookup (rules.c), actions and their keys (actions.c), "
     "conditions and seeded draws (chance.c), the monotonic clock (clock.c), "
     "the pacing arithmetic both relays share (pace.c: latency marks, the token "
     "bucket, drip, after_bytes; pure, unit-tested), the libconfig loader (lcfg.c, "
     "config.c, with the HTTP rules' keys in config_http.c and the dns rules' "
     "in config_dns.c; slices.c: a large rules list parsed a slice of rules at a time; "
     "wideint.c), a parsed policy kept compiled in the run directory and rebuilt by "
     "later starts without libconfig (compiled.c: keyed by the file's text, the zone "
     "and the shim's build-id, each read checked; compiled_file.c: the copies kept, "
     "found by the file's identity or its text), memory a start keeps without malloc "
     "(startmem.c), large arrays on huge pages (bigalloc.c), the control wire "
     "format (wire.c), the run directory's names (rundir.c; pathcat.c: paths put "
     "together without printf, whose pages a start would fault in), the system "
     "calls core and a start make through syscall() (rawsys.c), a member's "
     "published state (segment.c: its layout, and the records faultctl makes of "
     "it), the live changes (edit.c), the rule index (lpm.c: a multibit trie "
     "over destination addresses, built per policy, shared by its copies), HTTP "
     "rules (http.c: match, per-request decision, answers), the HTTP/1.x "
     "parser's binding (hparse.c: libhttp-parser, dlmopen'd once, kept), dns "
     "rules and host patterns (dns.c; hostidx.c: their index of exact names and "
     "*.suffix patterns hashed from the name's end, built per policy), DNS "
     "messages read and answers built (dnswire.c, used by preload/dns) and the "
     "closest name to a misspelt one (suggest.c: did you mean). Built once into "
     "build/libfaultnet-core.a."),
    ("preload", {"preload/intercept", "preload/control", "preload/relay", "preload/sink",
                 "preload/stats", "preload/dns", "preload/fd", "preload/tls", "preload/base",
                 "core"},
     "the library's entry points: hooks.c (every exported symbol, one line each, "
     "declared in hooks.list) and init.c (the constructor, fork handler)."),
    ("preload/intercept", {"preload/relay", "preload/sink", "preload/stats", "preload/dns",
                           "preload/fd", "preload/base", "core"},
     "what each hooked call does: connect and getpeername (connect.c), the "
     "datagram paths (datagram.c), socket/accept/close/dup/fcntl (fdlife.c), "
     "libraries loaded with RTLD_DEEPBIND (dlopen.c) and the fault decision "
     "(fault.c: which rule, where to go)."),
    ("preload/control", {"preload/stats", "preload/fd", "preload/base", "core"},
     "joining the group (control.c: the group's change counter mapped, the "
     "journal replayed, stale files swept at most every 10 s), the member's published state as a "
     "file (segfile.c) and the changes the journal holds (commands.c: enable, "
     "disable, add, rm, load, zone, reset). No thread."),
    ("preload/relay", {"preload/h2", "preload/sink", "preload/stats", "preload/fd",
                       "preload/tls", "preload/base", "core"},
     "the relay threads, one per shard (relay_shard.h; a second once the first "
     "carries 16 connections): their epoll loop (relay.c), which connections a round "
     "steps (relay_sched.c: a ready list and a timer heap), one relayed connection's setup "
     "(relay_conn.c; its connection to the peer from the app's own port: "
     "relay_port.c) and byte pump (relay_pump.c), the pipe a message untouched "
     "by the rule is spliced through (splice.c), the shaping of a direction's "
     "buffer on core/pace.c (shape.c, pure), delayed inbound datagrams (reinject.c), per-request HTTP "
     "faults (relay_http.c: a connection's requests and answers parsed, each "
     "request answered, forwarded or cut; the server connected to lazily), the "
     "TLS ends of a connection it terminates (relay_tls.c: the app's handshake "
     "answered with a leaf, the server's verified, records through memory BIOs) and "
     "the connections an established rule covers (relay_follow.c: the rule in "
     "force applied or undone when the policy changes). HTTP is a mode of the "
     "relay, not a room of its own: it runs on the first relay thread (shard 0), "
     "its epoll loop and connections."),
    ("preload/h2", {"preload/stats", "preload/base", "core"},
     "HTTP/2 for the relay's HTTP engine, bytes in and bytes out, no socket: "
     "libnghttp2 bound once, dlmopen'd (h2lib.c), one connection's two "
     "sessions, the app's as its server and the server's as its client, with "
     "what passes between them: header lists, DATA, trailers, resets, SETTINGS, "
     "WINDOW_UPDATEs, PINGs and GOAWAYs (h2.c), and the HTTP rules on each "
     "stream: forwarded, held, answered (a gRPC status as Trailers-Only or "
     "after the server's headers), reset, refused by a GOAWAY or cut "
     "(h2fault.c), and each stream's FAULTNET_REQUESTS line (h2log.c). Called "
     "by relay_http.c on the relay's thread only."),
    ("preload/dns", {"preload/stats", "preload/fd", "preload/base", "core"},
     "the resolver hooks' work (resolve.c: dns rules on getaddrinfo and the "
     "gethostbyname family; resolve_async.c: on getaddrinfo_a, gai_suspend and "
     "gai_cancel; responder.c and responder_io.c: the nameserver standing in "
     "for the ones a dns rule covers, for queries sent on sockets, answering "
     "only its own process: peer.c finds the sender among its sockets) and the names "
     "each address was resolved from (names.c: 1,024 entries allocated at the "
     "first lookup worth keeping, written under a mutex by the app's resolving "
     "threads, read without a lock, each entry a seqlock, by the connect path "
     "of rules with match.host, through core's fn_host_resolved: the sanctioned "
     "upcall below)."),
    ("preload/tls", {"preload/base", "core"},
     "the TLS termination's ground, used by relay_tls.c: OpenSSL 3 "
     "bound once in a namespace of its own, loaded only when a connection "
     "needs it (ossl.c), the run's CA made once per run directory, owner "
     "only (ca.c), what the CA and the leaves share (cert.c), a leaf and its "
     "server context per name, cached (leaf.c), the leaves of the tls "
     "action's certificate faults, each with one defect, and their never "
     "sent issuers (badleaf.c), and a ClientHello's SNI name "
     "and ALPN list (hello.c); the trust hook's work (trust.c: the run's CA "
     "trusted by one verification of the app's own OpenSSL 3, when the "
     "server behind the relay's leaf passes the app's own store; gtrust.c: "
     "the same for the app's GnuTLS, against its credentials' trust list)."),
    ("preload/sink", {"preload/fd", "preload/base", "core"},
     "the loopback endpoints that make faults out of kernel behaviour (sink.c): "
     "blackhole, stall, hold, refuse, UDP sink."),
    ("preload/stats", {"preload/fd", "preload/base", "core"},
     "lock-free counters per destination and rule and the event ring "
     "(stats.c), per-request counts by method, Host and path prefix "
     "(requests.c, written by the relay thread only), the HTTP/2 engine's "
     "connections and the gRPC statuses, RST_STREAMs and GOAWAYs it sent, by code "
     "(h2sent.c), per-name counts of the "
     "resolver hooks (lookups.c), all in the member's published state (fn_seg), "
     "and the policy's listing there (listing.c); the request log "
     "(reqlog.c: FAULTNET_REQUESTS, a JSON line per HTTP request the relay "
     "thread filled, credentials redacted, through the events file's writer)."),
    ("preload/fd", {"preload/base", "core"},
     "the per-fd flag table and fault records, moving the shim's fds high, fd "
     "identity (dev, ino) (fdtab.c), TCP acked bytes (tcpbytes.c)."),
    ("preload/base", {"core"},
     "what every part of the shim stands on: the trampolines (libc.c, LIBC(), "
     "their fields from hooks.list; elfsym.c: at start, libc's functions found "
     "in the loaded objects' symbol tables, as dlsym would), the published policy and when a replaced one "
     "is freed (policy.c), "
     "the group's change counter and change lock (groupseq.c), the owning pid "
     "(owner.c: vfork detection), signals blocked and the shim's threads "
     "started (signals.c), the end of a process only the shim's threads are "
     "left in (alone.c), messages to stderr (say.c), the byte queue the HTTP "
     "engine and its HTTP/2 sessions hold bytes in (queue.c)."),
    ("ctl", {"ctl/scenario", "ctl/state", "core", "bpf", "preload/tls"},
     "faultctl (faultctl.c: options, and the verb table that drives the "
     "dispatch, the usage text and help --verbs): check, run (run.c; reach.c: "
     "the programs the shim cannot reach; cavars.c: the run's CA made before "
     "the command starts, with preload/tls's own code, and NODE_EXTRA_CA_CERTS "
     "naming it, and JAVA_TOOL_OPTIONS a JKS trust store with it (jks.c), for "
     "clients that read their trust at start), ps, rules, stats, events (the live "
     "members found and asked by targets.c; stats also sums the kept counts of "
     "members gone), gc and mark (faultctl.c), requests (requests.c: the request log "
     "read back, filtered, followed, per call, as HAR) and every change verb (change.c: "
     "journaled, checked by faultctl itself against a member's policy, "
     "check.c, and put in force by the group's counter; journal.c writes the "
     "group's journal and counter); bundle, docker and compose (bundle.c: the "
     "self-contained bundle found and checked against a root's C library; "
     "container.c: docker run and the Compose override with it)."),
    ("ctl/scenario", {"ctl/state", "core"},
     "faultctl scenario: the file parsed and checked (parse.c), run (run.c), "
     "reported as report.json and junit.xml (report.c) and report.svg "
     "(svg.c); the app's marks (marks.c: faultctl mark into GROUP.marks of "
     "the run directory, and the file FAULTNET_MARKS names). One thread, no locks; it forks the scenario's command (and "
     "starts its clock once that has joined the group), each step (faultctl "
     "itself, as `faultctl -g GROUP [--ahead] VERB ARG`, --ahead for its own "
     "group only) and each "
     "probe run (in its own process group, killed at its timeout), reads the "
     "group's counters from the files of FAULTNET_STATS_DIR, and blocks SIGINT "
     "and SIGTERM only while it undoes."),
    ("ctl/state", {"core"},
     "what faultctl reads and shows of a member: its state file read with "
     "pread, never mapped (segread.c), the members that have not joined yet, "
     "found in /proc and their state made up as their file will hold it "
     "(unjoined.c), the kernel's table of file locks, read once to find a "
     "large group's live members and those of other pid namespaces "
     "(locktab.c), and records shown as tables or JSON (render.c)."),
    ("ctl/probe", set(),
     "faultnet-probe (probe.c): a scenario's HTTP probe, a program of its own "
     "so that it can run under the shim (faultctl keeps the shim idle in "
     "itself)."),
    ("bpf", {"core"},
     "the kernel-side backend, linked into faultctl only: faultnet.bpf.c (the "
     "BPF programs: cgroup_skb egress and ingress drops, cgroup connect4/6 "
     "redirects, getpeername4/6 answers and a sockops program for delayed SYNs "
     "and the relay; built with clang -target bpf and embedded by bpftool's "
     "skeleton), shared.h (the maps' layout, both sides), compile.c (a policy "
     "as map contents; pure, unit-tested), backend.c (loading, attaching, the "
     "run), cgroup.c (the run's cgroup), maps.c (a plan written into the set "
     "not in force, then the flip), slots.c (per rule name: its counters' slot "
     "and its numbers), endpoints.c (the loopback sockets connects are sent "
     "to), relay.c (the stream faults, outside the app: its listeners and loop) "
     "with pump.c (one connection's pass, paced by core/pace.c), events.c (the programs' ring buffer of faults), control.c "
     "(the run as a member of its group), lbpf.c (libbpf and zlib, opened by "
     "a backend run only, so that no other verb pays for loading them at its "
     "start), httppump.c (HTTP rules' connections handed to the pump) and "
     "pumpd.c (faultnet-pump, a program of its own run under the shim, whose "
     "connects meet the shim's HTTP engine)."),
]
ALLOWED = {room: uses for room, uses, _ in ROOMS}

# The function pointers through which a room calls one above it, each
# installed by one source of the upper room: (the pointer, or the function
# that stores one, in the lower room; the lower source that calls through
# it; the installing source; why). Any other such installation is an
# undeclared upward call.
UPCALLS = [
    ("fn_host_resolved", "core/rules.c", "preload/dns/names.c",
     "a rule with match.host asks which names an address was resolved from; "
     "the memory of names is the shim's, faultctl's copy of core has none"),
    ("fn_groupseq_attach", "preload/base/groupseq.c", "preload/control/control.c",
     "the change counter is looked at on every policy read, below the room "
     "that knows how to apply the journal"),
]
HOOKS = "preload/hooks.c"


def exported_names(root):
    """The names preload/hooks.list declares: the first field of each line."""
    names = []
    for line in open(os.path.join(root, "preload/hooks.list")):
        if line.strip() and not line.lstrip().startswith("#"):
            names.append(line.split("|")[0].strip())
    return set(names)


def symbols(obj, flag):
    out = subprocess.run(["gcc-nm", flag, obj], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if flag == "-u" and len(parts) >= 2:
            names.add(parts[-1])
        elif flag == "--defined-only" and len(parts) == 3 and parts[1] in "TDBRtdbr":
            names.add(parts[2])
    return names


def sources(root):
    for room in ALLOWED:
        d = os.path.join(root, room)
        for f in sorted(os.listdir(d)):
            if f.endswith(".c") and not f.endswith(".bpf.c"):  # .bpf.c: kernel programs
                yield room, os.path.join(room, f)


DOC = "docs/ARCHITECTURE.md"
NAME_COL = 19
WIDTH = 79


def wrap(head, text):
    return textwrap.fill(text, width=WIDTH, initial_indent=head.ljust(NAME_COL),
                         subsequent_indent=" " * NAME_COL, break_on_hyphens=False,
                         break_long_words=False)


def below(room):
    """Every room a room may reach, directly or through those it uses."""
    seen, todo = set(), list(ALLOWED[room])
    while todo:
        r = todo.pop()
        if r not in seen:
            seen.add(r)
            todo.extend(ALLOWED[r])
    return seen


def print_rooms():
    return "\n".join(wrap(room + "/", text) for room, _, text in ROOMS)


def print_calls():
    order = [r for r, _, _ in ROOMS]
    height = sorted(order, key=lambda r: (-len(below(r)), order.index(r)))
    lines = []
    for room in height:
        uses = sorted(ALLOWED[room], key=height.index)
        lines.append(wrap(room, "-> " + (", ".join(uses) if uses else "(nothing)")))
    lines.append("")
    lines.append("upward, through a function pointer (these only):")
    for sym, caller, installer, _ in UPCALLS:
        lines.append(f"{caller} -> {sym} <- installed by {installer}")
    return "\n".join(lines)


BLOCKS = {"rooms": print_rooms, "calls": print_calls}


def doc_block(text, which):
    """The fenced block after the marker naming `which`, or None."""
    m = re.search(r"<!-- check_layout\.py --print %s -->\n```\n(.*?)\n```" % which, text, re.S)
    return m


def check_doc(root):
    text = open(os.path.join(root, DOC)).read()
    bad = 0
    for which, make in BLOCKS.items():
        m = doc_block(text, which)
        if not m:
            print(f"layout: {DOC} has no `check_layout.py --print {which}` block")
            bad += 1
        elif m.group(1) != make():
            print(f"layout: {DOC}'s {which} block differs from check_layout.py --print {which} "
                  f"(run tests/layout/check_layout.py --write-doc)")
            bad += 1
    return bad


def write_doc(root):
    path = os.path.join(root, DOC)
    text = open(path).read()
    for which, make in BLOCKS.items():
        m = doc_block(text, which)
        if m:
            text = text[:m.start(1)] + make() + text[m.end(1):]
    open(path, "w").write(text)


def unroomed(root):
    """Sources in a folder that is no room, or that their room's text does not name."""
    bad = 0
    texts = {room: text for room, _, text in ROOMS}
    for top in ("core", "preload", "ctl", "bpf"):
        for d, _, files in os.walk(os.path.join(root, top)):
            room = os.path.relpath(d, root)
            for f in sorted(f for f in files if f.endswith(".c")):
                if room not in texts:
                    print(f"layout: {room}/{f} is in no room (ROOMS has no {room})")
                    bad += 1
                elif not re.search(r"(?<![\w/.])%s\b" % re.escape(f), texts[room]):
                    print(f"layout: {room}/{f} is in no room's list ({room}'s text does not name it)")
                    bad += 1
    return bad


def declarations(path):
    """A header's top-level declarations, comments and braces' contents removed."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", open(path).read(), flags=re.S)
    text = re.sub(r"^#.*$", "", text, flags=re.M)
    while True:
        t = re.sub(r"\{[^{}]*\}", "", text)
        if t == text:
            break
        text = t
    return [" ".join(d.split()) for d in text.split(";")]


def installers(root):
    """(symbol, room) for every function pointer a room's headers let another
    room install: an extern pointer variable, or a function that stores a
    function-pointer argument (its body assigns the parameter)."""
    found = []
    for room in ALLOWED:
        d = os.path.join(root, room)
        bodies = "".join(open(os.path.join(d, f)).read() for f in os.listdir(d) if f.endswith(".c"))
        for h in sorted(f for f in os.listdir(d) if f.endswith(".h")):
            for decl in declarations(os.path.join(d, h)):
                var = re.match(r"extern [^(]*\(\s*\*\s*(\w+)\s*\)\s*\(", decl)
                if var:
                    found.append((var.group(1), room))
                    continue
                fn = re.match(r"[\w\s\*]*?\b(\w+)\s*\((.*\(\s*\*\s*\w+\s*\).*)\)$", decl)
                if not fn:
                    continue
                for param in re.findall(r"\(\s*\*\s*(\w+)\s*\)", fn.group(2)):
                    if re.search(r"=\s*%s\s*;" % param, bodies):
                        found.append((fn.group(1), room))
    return found


def check_upcalls(root, undefs, defs):
    bad = 0
    declared = {(sym, inst) for sym, _, inst, _ in UPCALLS}
    seen = set()
    for sym, low in installers(root):
        if defs.get(sym) != low:
            continue
        for src, (room, names) in undefs.items():
            if sym in names and room != low and low in below(room):
                seen.add((sym, src))
                if (sym, src) not in declared:
                    print(f"layout: {src} ({room}) installs {sym} of {low}: an upward call through a "
                          "function pointer that UPCALLS (and ARCHITECTURE.md) does not declare")
                    bad += 1
    for sym, caller, inst, _ in UPCALLS:
        if (sym, inst) not in seen or not os.path.exists(os.path.join(root, caller)):
            print(f"layout: UPCALLS names {inst} installing {sym} for {caller}, which the code no longer does")
            bad += 1
    return bad


LOCK_TYPES = r"pthread_mutex_t|pthread_spinlock_t|pthread_rwlock_t|sem_t"


def code_locks(root):
    """(file, variable) of every lock declared at file scope or as a member."""
    out = set()
    for room in ALLOWED:
        d = os.path.join(root, room)
        for f in sorted(os.listdir(d)):
            if not f.endswith((".c", ".h")):
                continue
            for line in open(os.path.join(d, f)):
                m = re.match(r"(\s*)(?:static\s+)?(?:%s)\s+(\w+)" % LOCK_TYPES, line)
                if m and (f.endswith(".h") or not m.group(1)):
                    out.add((f"{room}/{f}", m.group(2)))
    return out


def check_locks(root):
    text = open(os.path.join(root, DOC)).read()
    table = text.split("## Locks", 1)[1].split("\n\n", 2)[1]
    named = set(re.findall(r"`([\w/.]+): (\w+)`", table))
    bad = 0
    for f, var in sorted(code_locks(root) - named):
        print(f"layout: the lock {var} of {f} is not in {DOC}'s locks table (`{f}: {var}`)")
        bad += 1
    for f, var in sorted(named - code_locks(root)):
        print(f"layout: {DOC}'s locks table names `{f}: {var}`, which the code does not declare")
        bad += 1
    return bad


START_DATA_MAX = 512  # preload/startdata.ld's alignment: the block never straddles a page


def check_start_data(build):
    """The variables a start touches (FN_START_DATA) fit the block
    preload/startdata.ld keeps them in: one page fault at most, and none
    when .bss begins on their page."""
    lib = os.path.join(build, "libfaultnet.so")
    out = subprocess.run(["readelf", "-SW", lib], capture_output=True, text=True).stdout
    block = [line.replace("[ ", "[").split() for line in out.splitlines()
             if " fn_start_block " in line]
    # core/startmem.c's block: on a page of its own, so that a start's
    # strings and a small policy's copy take one page fault, not two
    if not block or block[0][2] != "NOBITS" or int(block[0][3], 16) % 4096:
        print(f"layout: {lib}: no page-aligned fn_start_block section (preload/startdata.ld)")
        return 1
    for line in out.splitlines():
        f = line.replace("[ ", "[").split()
        if len(f) > 6 and f[1] == "fn_start_data":
            size = int(f[5], 16)
            if size <= START_DATA_MAX:
                return 0
            print(f"layout: {lib}: the FN_START_DATA variables take {size} bytes, "
                  f"over the {START_DATA_MAX} that preload/startdata.ld keeps on one page")
            return 1
    print(f"layout: {lib} has no fn_start_data section (preload/startdata.ld not used?)")
    return 1


START_TEXT_SPAN = 32 << 10  # the first 32 KiB of code


def sections(readelf_s):
    """Name -> (address, size) from readelf -SW."""
    out = {}
    for line in readelf_s.splitlines():
        f = line.replace("[ ", "[").split()
        if len(f) > 6 and f[0].startswith("["):
            try:
                out[f[1]] = (int(f[3], 16), int(f[5], 16))
            except ValueError:
                pass
    return out


def check_start_section(lib, readelf_s, init):
    """preload/startdata.ld's fn_start_text: the exit's .fini and the
    pthread_atfork stub, ahead of .text in the code a start maps at once
    (each lay on a page of its own), the code beginning an aligned 64 KiB;
    the constants (fn_rodata, where a start reads its strings) within the
    aligned 64 KiB of the first segment, which the loader maps at every
    load. And the data the loader writes at every start (relocations, the
    FN_START_DATA block, the zeroing of the file's last page) on two
    pages: an 8 KiB initialised array among them once made four."""
    sec = sections(readelf_s)
    bad = 0
    at, size = sec.get("fn_start_text", (0, 0))
    fini = sec.get(".fini", (0, 0))[1]
    if not at or fini or init % 0x10000 or at + size - init > START_TEXT_SPAN:
        print(f"layout: {lib}: no fn_start_text section within the first {START_TEXT_SPAN} "
              f"bytes of code, a .fini of its own after .text, or code that does not begin an "
              f"aligned 64 KiB (.init at {init:#x}; preload/startdata.ld)")
        bad += 1
    # The constants in the first segment's aligned 64 KiB, with the symbol
    # tables the loader reads: no fault of their own at a start (after the
    # code, the first getenv's string was one); 92 KiB of zeros among them
    # (FN_FAR_RODATA now) would push them past it
    ro_at, ro_size = sec.get("fn_rodata", (0, 0))
    dynsym = sec.get(".dynsym", (0, 0))[0]
    if not ro_at or sec.get(".rodata", (0, 0))[1] or ro_at >= init or \
            ro_at + ro_size > (dynsym | 0xFFFF) + 1:
        print(f"layout: {lib}: the constants (fn_rodata, {ro_size} bytes at {ro_at:#x}) are not "
              f"all ahead of the code within the 64 KiB of the loader's tables (.dynsym at "
              f"{dynsym:#x}): a large constant no start reads belongs in FN_FAR_RODATA "
              f"(core/startdata.h)")
        bad += 1
    start = min((a for n, (a, _) in sec.items() if n in (".init_array", ".data.rel.ro")),
                default=0)
    data_at, data_size = sec.get("fn_start_data", (0, 0))
    pages = (data_at + data_size - 1) // 4096 - start // 4096 + 1
    if not start or not data_at or pages > 2:
        print(f"layout: {lib}: the data a start's load writes (from .init_array to the end of "
              f"fn_start_data) spans {pages} pages, over 2: is an initialised array in .data?")
        bad += 1
    return bad


def start_text_names(root):
    """The functions FN_START_TEXT marks (core/startdata.h), by name."""
    mark = re.compile(r"^FN_START_TEXT\s+(?:static\s+)?[\w\s\*]*?\b(\w+)\(", re.M)
    names = set()
    for room in ALLOWED:
        d = os.path.join(root, room)
        for f in os.listdir(d):
            if f.endswith(".c"):
                names |= set(mark.findall(open(os.path.join(d, f)).read()))
    return names


def check_start_text(root, build):
    """The functions FN_START_TEXT marks, which every start runs, lie in
    the first 32 KiB of the shim's code, with the constructor's own (which
    the compiler puts in .text.startup): the kernel maps the cached pages
    around a fault within an aligned 64 KiB of address space, so the start's
    code then takes one or two faults, where spread over the library it
    took five (issue 42). Names the compiler inlined everywhere have no
    symbol: nothing to check."""
    lib = os.path.join(build, "libfaultnet.so")
    sec = subprocess.run(["readelf", "-SW", lib], capture_output=True, text=True).stdout
    init = [int(f[3], 16) for f in (line.replace("[ ", "[").split() for line in sec.splitlines())
            if len(f) > 3 and f[1] == ".init"]
    names = start_text_names(root)
    if not init or not names:
        print(f"layout: {lib} has no .init, or no source marks FN_START_TEXT")
        return 1
    bad = check_start_section(lib, sec, init[0])
    for line in subprocess.run(["nm", lib], capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "tT" and f[2].split(".")[0] in names:
            at = int(f[0], 16) - init[0]
            if at >= START_TEXT_SPAN:
                print(f"layout: {lib}: {f[2]} (FN_START_TEXT) is {at} bytes into the code, "
                      f"past the first {START_TEXT_SPAN} that a start maps at once")
                bad += 1
    return bad


def check_load_contiguous(build):
    """The shim's loadable segments: three (the read-only one, the code,
    the data), and no hole in the address space between them, by the
    loader's own rule (glibc's elf/dl-load.c: a segment's pages must begin
    where the previous one's file pages end). Each further segment is one
    more mapping the loader makes and the kernel keeps until the exit
    (constants after the code made a fourth); a hole has the loader make
    the whole stretch PROT_NONE before it maps the segments over it
    (preload/startdata.ld)."""
    lib = os.path.join(build, "libfaultnet.so")
    out = subprocess.run(["readelf", "-lW", lib], capture_output=True, text=True).stdout
    loads = [line.split() for line in out.splitlines() if line.split()[:1] == ["LOAD"]]
    page, prev_end, bad = 4096, None, 0
    for f in loads:
        vaddr, filesz = int(f[2], 16), int(f[4], 16)
        start = vaddr // page * page
        if prev_end is not None and start != prev_end:
            print(f"layout: {lib}: a hole in the address space from {prev_end:#x} to {start:#x} "
                  f"between two loadable segments: the loader maps it PROT_NONE at every start "
                  f"(preload/startdata.ld)")
            bad += 1
        prev_end = (vaddr + filesz + page - 1) // page * page
    flags = [" ".join(f[6:-1]) for f in loads]
    if flags != ["R", "R E", "RW"]:
        print(f"layout: {lib}: loadable segments {flags}, not the three R, R E, RW: each more "
              f"is a mapping of every start's (preload/startdata.ld)")
        bad += 1
    return bad


def main():
    if sys.argv[1:2] == ["--print"]:
        print(BLOCKS[sys.argv[2]]())
        return 0
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if sys.argv[1:2] == ["--write-doc"]:
        write_doc(root)
        return 0
    build = sys.argv[1]
    exports = exported_names(root)
    srcs = list(sources(root))
    bad = unroomed(root) + check_doc(root) + check_locks(root)
    defs, undefs = {}, {}
    for room, src in srcs:
        obj = os.path.join(build, "obj", src[:-2] + ".o")
        if not os.path.exists(obj) and src in ("bpf/backend.c", "bpf/control.c", "bpf/endpoints.c"):
            print(f"layout: {src} is not built (no libbpf): not checked")
            continue
        if not os.path.exists(obj):
            print(f"layout: {obj} is not built")
            return 1
        # The exported names are libc's (and other libraries') too: rule 1 covers them.
        for name in symbols(obj, "--defined-only") - exports:
            defs.setdefault(name, room)
        undefs[src] = (room, symbols(obj, "-u"))
    for src, (room, names) in undefs.items():
        if src != HOOKS and not room.startswith("ctl") and room != "bpf":  # faultctl's own
            for n in sorted(names & exports):
                print(f"layout: {src} refers to {n}, which the shim exports: use LIBC({n})")
                bad += 1
        for n in sorted(names):
            home = defs.get(n)
            if home and home != room and home not in ALLOWED[room]:
                print(f"layout: {src} ({room}) calls {n} in {home}: upward")
                bad += 1
    inc = re.compile(r'^#include "((?:core|preload|ctl|bpf)/[^"]+)"', re.M)
    for room, src in srcs + [(r, os.path.join(r, f)) for r in ALLOWED
                             for f in os.listdir(os.path.join(root, r)) if f.endswith(".h")]:
        for h in inc.findall(open(os.path.join(root, src)).read()):
            home = os.path.dirname(h)
            if home != room and home not in ALLOWED[room]:
                print(f"layout: {src} ({room}) includes {h}: upward")
                bad += 1
    bad += check_upcalls(root, undefs, defs)
    bad += check_start_data(build) + check_start_text(root, build)
    bad += check_load_contiguous(build)
    print(f"layout: {len(srcs)} sources in {len(ALLOWED)} rooms checked, {bad} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
