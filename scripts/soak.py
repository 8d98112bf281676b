#!/usr/bin/env python3
"""A soak run: http_server and echo_server under load_tester for N minutes, with misbehaving
clients and chaos proxies mixed in, sampled every second; fails when memory or descriptors grow
after warm-up or an unexpected error appears. Run through scripts/soak.sh, which builds the
programs.

  soak.py BUILD_DIR OUT_DIR MINUTES

The load, on loopback only:
  - load_tester --mode http against http_server and --mode echo against echo_server, 32
    connections each, for the whole run: every request must be answered (errors=0);
  - chaos clients, a new one every 50 ms, in turn: a request sent one byte at a time with a
    pause between bytes; half a request, then silence (the server's request timeout closes it);
    a request, then a reset before the answer is read; a request, then a half-close; 4 KiB of
    garbage. Each misbehaving client is done when the server has closed its connection or after
    at most 4 s;
  - a chaos_proxy (tests/support/chaos_proxy_main.cpp) in front of each server, four fault pairs
    taken in turn (its connection i gets pair i mod 4), and through it rounds of load_tester,
    one after another for the whole run, 8 connections a round (2 per pair, 20 requests each at
    most):
      echo_server  1-byte pieces both ways, 1 ms apart towards the server | a reset 10 bytes
                   into the 4th message | a half-close 10 bytes into the 3rd (the server echoes
                   them, then ends) | a stall 10 bytes into the 3rd (--idle-ms ends it);
      http_server  the same pieces | a reset 50 bytes into the 3rd answer | a half-close 50
                   bytes into it | a stall 5 bytes into the first request (408 at
                   --request-timeout-ms).
    Each round must report exactly what its faults make: all 20 requests on each connection the
    proxy only splits and delays, the requests before the cut on the others and then one error
    each, of its kind (echo: 3 reads; http: 2 reads, 1 invalid), exit status 1. Any error on a
    split connection would change both figures. When the proxies stop, their figures must add
    up: accepted 8 per round, 2 resets, 2 half-closes and 2 stalls per round, every connection
    closed before the stop (a stalled one once both of its peers ended; the servers' timeouts
    bound it), and every one the proxy did not reset saw its server's end.
A 3 s burst of the same load comes first, so that the servers' lazily made descriptors exist
before the baseline is counted. Sampled every second for each server: resident memory (VmRSS),
open descriptors (/proc/PID/fd) and CPU (utime + stime). Warm-up is the first fifth of the run
(at least 10 s). Fails when, comparing the last quarter of the samples with the quarter after
warm-up (medians), memory grows by more than 10 % + 4 MiB or descriptors by more than 10 % + 8
(the proxied rounds hold at most 8 connections of each server at a time, and a stalled one
until the server's 1 s timeout: they are in both quarters alike); when a server's descriptors
are not back to their count before the load within 10 s of its end (kind by kind; only a
loop's one precise-wake timerfd, one per server thread, may come late); when a direct
load_tester reports an error; when a proxied round's figures differ from the expected ones;
when a proxy's figures do not add up; when a server or a proxy writes anything to stderr; or
when a server or a proxy does not exit 0 on SIGTERM. Writes OUT_DIR/samples.csv,
OUT_DIR/summary.txt and OUT_DIR/soak.png.
"""

import collections
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

PAGE = os.sysconf("SC_PAGE_SIZE")
SERVER_THREADS = 2
TICKS = os.sysconf("SC_CLK_TCK")
ECHO_SIZE = 64  # load_tester's default --size
ROUND_REQUESTS = 20  # a proxied round's requests on each connection that reaches its end
PER_PAIR = 2  # a proxied round's connections per fault pair
ERROR_KINDS = ("connect", "read", "write", "invalid")  # load_tester's "errors N: ..." line
ACTIONS = {"reset-after": "resets", "half-close-after": "half_closes", "stall-after": "stalls"}
# One fault pair of a proxy (chaos_proxy --faults TO_SERVER/TO_CLIENT) and what one load_tester
# connection through it comes to: its requests, the kind of its one error (None: no error), and
# the bytes the proxy forwards each way (None where they are not fixed by the pair alone).
Pair = collections.namedtuple("Pair", "faults requests error to_server to_client")


def start_server(command):
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    match = re.search(r":(\d+)\s*$", line)
    if not match:
        process.kill()
        process.wait()
        raise SystemExit(f"soak: {command[0]} did not say where it listens: {line!r}")
    return process, int(match.group(1))


def descriptors(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def descriptor_kinds(pid):
    """What the open descriptors are ("socket", "anon_inode:[eventfd]", ...), counted."""
    kinds = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            kind = re.sub(r":\[\d+\]$", "", os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def settled_descriptors(pid):
    """The descriptor count once the server has settled: its threads open theirs (event loops,
    rings, wake-up descriptors) after it says where it listens. Unchanged for 0.5 s, at most 5 s."""
    count, since, deadline = descriptors(pid), time.monotonic(), time.monotonic() + 5
    while time.monotonic() - since < 0.5 and time.monotonic() < deadline:
        time.sleep(0.05)
        now = descriptors(pid)
        if now != count:
            count, since = now, time.monotonic()
    return count


def sample(pid):
    with open(f"/proc/{pid}/statm") as f:
        rss = int(f.read().split()[1]) * PAGE
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICKS
    return rss, descriptors(pid), cpu


def wait_closed(s, limit):
    """Reads until the server closes (or resets) the connection, at most `limit` seconds."""
    s.settimeout(limit)
    try:
        while s.recv(65536):
            pass
    except (socket.timeout, ConnectionError):
        pass


def chaos_client(kind, port, request):
    s = socket.create_connection(("127.0.0.1", port), timeout=4)
    try:
        if kind == "slow":
            for b in request:
                s.send(bytes([b]))
                time.sleep(0.002)
            wait_closed(s, 4)
        elif kind == "stall":
            s.send(request[: len(request) // 2])
            wait_closed(s, 4)
        elif kind == "reset":
            s.send(request)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        elif kind == "half_close":
            s.send(request)
            s.shutdown(socket.SHUT_WR)
            wait_closed(s, 4)
        elif kind == "garbage":
            s.send(random.randbytes(4096))
            wait_closed(s, 4)
    except (ConnectionError, socket.timeout):
        pass
    finally:
        s.close()


def chaos(targets, stop, counts):
    kinds = ["slow", "stall", "reset", "half_close", "garbage"]
    threads = []
    n = 0
    while not stop.is_set():
        port, request = targets[n % len(targets)]
        kind = kinds[(n // len(targets)) % len(kinds)]
        t = threading.Thread(target=chaos_client, args=(kind, port, request), daemon=True)
        t.start()
        threads.append(t)
        counts[kind] = counts.get(kind, 0) + 1
        n += 1
        threads = [t for t in threads if t.is_alive()]
        stop.wait(0.05)
    for t in threads:
        t.join(5)


def http_answer_size(port):
    """The length of http_server's whole answer to a GET / like load_tester's (a fixed length:
    its Date header has a fixed width)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: soak\r\n\r\n")
        data = b""
        for _ in range(1000):
            head, ended, body = data.partition(b"\r\n\r\n")
            length = re.search(rb"\r\ncontent-length: *(\d+)", head, re.IGNORECASE)
            if ended and length and len(body) >= int(length.group(1)):
                return len(head) + len(ended) + int(length.group(1))
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    raise SystemExit(f"soak: no whole answer from http_server: {data[:200]!r}")


def proxy_plans(http_answer):
    """Each proxy's fault pairs, taken in turn (Pair). Echo: the server echoes what reaches it,
    so both byte counts follow; a reset comes right after its last byte is forwarded, before
    any echo of it. HTTP: the request's length depends on the proxy's port (load_tester's Host
    header) and the 408 answer is the server's own, so the bytes are not checked."""
    message = ECHO_SIZE
    third = 2 * message + 10  # 10 bytes into the third message
    into_third_answer = 2 * http_answer + 50  # inside the third answer's head
    pieces = "split,delay=1/split"
    whole = ROUND_REQUESTS * message
    return {
        "echo": [Pair(pieces, ROUND_REQUESTS, None, whole, whole),
                 Pair(f"reset-after={3 * message + 10}", 3, "read", 3 * message + 10, 3 * message),
                 Pair(f"half-close-after={third}", 2, "read", third, third),
                 Pair(f"stall-after={third}", 2, "read", third, third)],
        "http": [Pair(pieces, ROUND_REQUESTS, None, None, None),
                 Pair(f"/reset-after={into_third_answer}", 2, "read", None, None),
                 Pair(f"/half-close-after={into_third_answer}", 2, "read", None, None),
                 Pair("stall-after=5", 0, "invalid", None, None)],
    }


def expected_round(plan):
    """A proxied round's requests and its errors by kind: PER_PAIR connections per pair."""
    errors = dict.fromkeys(ERROR_KINDS, 0)
    for pair in plan:
        if pair.error:
            errors[pair.error] += PER_PAIR
    return PER_PAIR * sum(pair.requests for pair in plan), errors


def round_figures(text):
    """The requests and the errors by kind that a load_tester run reported, or None."""
    result = re.search(r"^RESULT requests=(\d+) ", text, re.MULTILINE)
    errors = re.search(r"^errors \d+: connect (\d+), read (\d+), write (\d+), invalid (\d+)$",
                       text, re.MULTILINE)
    if not result or not errors:
        return None
    return int(result.group(1)), dict(zip(ERROR_KINDS, map(int, errors.groups())))


def proxied_load(load_tester, mode, port, plan, stop, record, max_rounds):
    """Rounds of load_tester through a chaos proxy, one after another until `stop` (at most
    `max_rounds`, each at most 30 s): each round's figures compared with the expected ones.
    `record` is this thread's until it is joined."""
    expected = expected_round(plan)
    command = [load_tester, "--mode", mode, "--port", str(port),
               "--connections", str(PER_PAIR * len(plan)), "--requests", str(ROUND_REQUESTS),
               "--timeout-ms", "5000", "--max-seconds", "30"]
    while not stop.is_set() and record["rounds"] < max_rounds:
        p = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            text = p.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            p.kill()
            text = p.communicate()[0] + "\n(killed after 60 s)"
        record["rounds"] += 1
        figures = round_figures(text)
        if figures:
            record["requests"] += figures[0]
        if p.returncode != 1 or figures != expected:
            record["differed"] += 1
            if len(record["examples"]) < 3:
                said = [l for l in text.splitlines()
                        if l.startswith(("load_tester:", "errors ", "RESULT ", "(killed"))]
                record["examples"].append(f"exit {p.returncode}: " + "; ".join(said)[:500])
            stop.wait(1)  # a proxy or server gone would make every round fail at once


def proxy_figures(text):
    """The key=value figures of a chaos_proxy's STATS line."""
    line = next((l for l in text.splitlines() if l.startswith("STATS ")), "")
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


def expected_proxy_figures(plan, rounds):
    """What a proxy must have counted after `rounds` rounds: each action once per connection
    that has it; every connection closed before the stop; every one not reset by the proxy
    seeing its server's end; the bytes each way, where the plan fixes them."""
    accepted = PER_PAIR * len(plan) * rounds
    figures = {"accepted": accepted, "closed": accepted}
    for name in ACTIONS.values():
        figures[name] = 0
    for pair in plan:
        for action, name in ACTIONS.items():
            figures[name] += pair.faults.count(action + "=") * PER_PAIR * rounds
    figures["server_ends"] = accepted - figures["resets"]
    for direction in ("to_server", "to_client"):
        counts = [getattr(pair, direction) for pair in plan]
        if None not in counts:
            figures["bytes_" + direction] = PER_PAIR * rounds * sum(counts)
    return figures


def median_of(values):
    return statistics.median(values) if values else 0


def stop_process(p):
    """SIGTERM; its stdout, its stderr and its exit status."""
    p.send_signal(signal.SIGTERM)
    text, errors = p.communicate(timeout=30)
    return text, errors, p.returncode


def proxy_report(server, plan, record, figures, errors, status):
    """The summary lines of one proxy and its rounds, and what failed."""
    rounds = record["rounds"]
    requests, kinds = expected_round(plan)
    expected = f"requests={requests} errors " + ", ".join(f"{k} {v}" for k, v in kinds.items())
    lines = [f"{server} via chaos_proxy (in turn: {' | '.join(p.faults for p in plan)}): "
             f"{rounds} rounds of {PER_PAIR * len(plan)} connections, each expected {expected}; "
             f"{record['differed']} differed; {record['requests']} requests",
             f"chaos_proxy before {server}: "
             + " ".join(f"{k}={v}" for k, v in figures.items()) + f", exit {status}"]
    failures = []
    if rounds == 0 or record["differed"]:
        failures.append(f"{server} via chaos_proxy: {record['differed']} of {rounds} rounds "
                        f"differed from {expected}; e.g. " + " /// ".join(record["examples"]))
    wrong = {k: (figures.get(k), v) for k, v in expected_proxy_figures(plan, rounds).items()
             if figures.get(k) != v}
    if wrong:
        failures.append(f"chaos_proxy before {server}: figures (got, expected) {wrong}")
    if status != 0:
        failures.append(f"chaos_proxy before {server}: exit status {status}")
    if errors.strip():
        failures.append(f"chaos_proxy before {server}: wrote to stderr: {errors.strip()[:400]}")
    return lines, failures


def main():
    build, out, minutes = sys.argv[1], sys.argv[2], float(sys.argv[3])
    os.makedirs(out, exist_ok=True)
    started = []  # every process the soak starts, stopped at the end whatever happens
    try:
        return soak(build, out, minutes, started)
    finally:
        for p in started:
            if p.poll() is None:
                p.kill()
                p.wait()


def soak(build, out, minutes, started):
    seconds = max(30, int(minutes * 60))
    warm_up = max(10, seconds // 5)
    examples = os.path.join(build, "examples")
    load_tester = os.path.join(examples, "load_tester")

    def start(command):
        process, port = start_server(command)
        started.append(process)
        return process, port

    servers = {}
    servers["http_server"] = start(
        [os.path.join(examples, "http_server"), "--port", "0", "--threads", str(SERVER_THREADS),
         "--request-timeout-ms", "1000", "--idle-timeout-ms", "3000"])
    servers["echo_server"] = start(
        [os.path.join(examples, "echo_server"), "--port", "0", "--threads", str(SERVER_THREADS),
         "--idle-ms", "1000"])
    http_port, echo_port = servers["http_server"][1], servers["echo_server"][1]
    http_request = b"GET / HTTP/1.1\r\nHost: soak\r\n\r\n"
    chaos_targets = [(http_port, http_request), (echo_port, b"echo me\n" * 8)]
    plans = proxy_plans(http_answer_size(http_port))
    proxies = {}
    for mode, port in (("http", http_port), ("echo", echo_port)):
        command = [os.path.join(build, "tests", "chaos_proxy"), "--target-port", str(port)]
        for pair in plans[mode]:
            command += ["--faults", pair.faults]
        proxies[mode] = start(command)
    records = {mode: {"rounds": 0, "requests": 0, "differed": 0, "examples": []}
               for mode in proxies}
    # A round lasts at least the servers' 1 s timeout (its stalled connections wait for it):
    # more rounds than seconds would mean rounds that fail at once.
    max_rounds = seconds + 20

    def start_load(duration):
        load = {}
        for name, mode, port in (("http", "http", http_port), ("echo", "echo", echo_port)):
            load[name] = subprocess.Popen(
                [load_tester, "--mode", mode, "--port", str(port),
                 "--connections", "32", "--duration", str(duration), "--timeout-ms", "5000",
                 "--max-seconds", str(duration + 60)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            started.append(load[name])
        stop = threading.Event()
        counts = {}
        threads = [threading.Thread(target=chaos, args=(chaos_targets, stop, counts))]
        for mode, (_, port) in proxies.items():
            threads.append(threading.Thread(
                target=proxied_load,
                args=(load_tester, mode, port, plans[mode], stop, records[mode], max_rounds)))
        for t in threads:
            t.start()
        return load, stop, counts, threads

    def stop_load(load, stop, threads):
        """Ends the chaos clients and the proxied rounds (the one in progress finishes: at most
        90 s) and waits for the direct load; its output."""
        stop.set()
        for t in threads:
            t.join(150)
        if any(t.is_alive() for t in threads):
            raise SystemExit("soak: the chaos clients or a proxied round did not end")
        return {name: p.communicate(timeout=120)[0] for name, p in load.items()}

    # A 3 s burst first: each server thread makes its lazily made descriptors (a loop's
    # precise-wake timerfd, made at its first short timer) before the baseline is taken.
    load, stop, _, threads = start_load(3)
    time.sleep(3)
    stop_load(load, stop, threads)
    time.sleep(5)  # the chaos clients' and the stalls' connections end by the servers' timeouts
    before = {name: settled_descriptors(p.pid) for name, (p, _) in servers.items()}
    kinds_before = {name: descriptor_kinds(p.pid) for name, (p, _) in servers.items()}

    load, stop, counts, threads = start_load(seconds)

    rows = []
    start_time = time.monotonic()
    for tick in range(seconds):
        time.sleep(max(0.0, start_time + tick + 1 - time.monotonic()))
        row = [tick + 1]
        for name, (p, _) in servers.items():
            row.extend(sample(p.pid))
        rows.append(row)
    results = stop_load(load, stop, threads)

    # Back to the descriptors before the load, within 10 s.
    after = {}
    extra = {}
    timers_after = {}
    for name, (p, _) in servers.items():
        deadline = time.monotonic() + 10
        while descriptors(p.pid) != before[name] and time.monotonic() < deadline:
            time.sleep(0.05)
        after[name] = descriptors(p.pid)
        kinds = descriptor_kinds(p.pid)
        timers_after[name] = kinds.get("anon_inode:[timerfd]", 0)
        extra[name] = {k: v - kinds_before[name].get(k, 0) for k, v in kinds.items()
                       if v != kinds_before[name].get(k, 0)}
    # The proxies after the servers' descriptors are back: by then every connection they held
    # has ended at both of its peers.
    proxy_results = {mode: stop_process(p) for mode, (p, _) in proxies.items()}
    stderr = {}
    status = {}
    for name, (p, _) in servers.items():
        _, stderr[name], status[name] = stop_process(p)

    with open(os.path.join(out, "samples.csv"), "w") as f:
        f.write("second,http_rss_bytes,http_fds,http_cpu_s,echo_rss_bytes,echo_fds,echo_cpu_s\n")
        for row in rows:
            f.write(",".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row) + "\n")

    failures = []
    lines = [f"soak: {seconds} s, warm-up {warm_up} s, chaos clients: "
             + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))]
    steady = [r for r in rows if r[0] > warm_up]
    quarter = max(1, len(steady) // 4)
    for index, name in ((1, "http_server"), (4, "echo_server")):
        early, late = steady[:quarter], steady[-quarter:]
        rss_early, rss_late = median_of([r[index] for r in early]), median_of([r[index] for r in late])
        fd_early, fd_late = median_of([r[index + 1] for r in early]), median_of([r[index + 1] for r in late])
        cpu = (rows[-1][index + 2] - rows[0][index + 2]) / max(1, rows[-1][0] - rows[0][0])
        peak_rss = max(r[index] for r in rows)
        lines.append(
            f"{name}: RSS {rss_early / 2**20:.1f} -> {rss_late / 2**20:.1f} MiB (peak {peak_rss / 2**20:.1f}), "
            f"descriptors {fd_early:.0f} -> {fd_late:.0f} (before the load {before[name]}, "
            f"10 s after it {after[name]}), CPU {cpu * 100:.0f} % of a core, exit {status[name]}")
        if rss_late > rss_early * 1.10 + 4 * 2**20:
            failures.append(f"{name}: memory grew after warm-up")
        if fd_late > fd_early * 1.10 + 8:
            failures.append(f"{name}: descriptors grew after warm-up")
        # A loop makes one timerfd in its life, at its first short timer under a coarse backend
        # (event/src/loop.cpp, precise-wake): one per server thread may come late. Every other
        # kind must be back to its count exactly.
        late_timers = extra[name].get("anon_inode:[timerfd]", 0)
        unexplained = {k: v for k, v in extra[name].items() if k != "anon_inode:[timerfd]"}
        if unexplained or late_timers < 0 or timers_after[name] > SERVER_THREADS:
            failures.append(f"{name}: {after[name]} descriptors after the load, {before[name]} "
                            f"before (changed: {extra[name]})")
        if status[name] != 0:
            failures.append(f"{name}: exit status {status[name]}")
        if stderr[name].strip():
            failures.append(f"{name}: wrote to stderr: {stderr[name].strip()[:400]}")
    for name, text in results.items():
        result = next((l for l in text.splitlines() if l.startswith("RESULT ")), "")
        lines.append(f"load_tester {name}: {result or text.strip()[-400:]}")
        errors = re.search(r"errors=(\d+)", result)
        if not errors or int(errors.group(1)) != 0:
            failures.append(f"load_tester {name}: errors (see its RESULT line)")
    for mode, server in (("http", "http_server"), ("echo", "echo_server")):
        text, errors, exit_status = proxy_results[mode]
        proxy_lines, proxy_failures = proxy_report(server, plans[mode], records[mode],
                                                   proxy_figures(text), errors, exit_status)
        lines.extend(proxy_lines)
        failures.extend(proxy_failures)
    lines.extend(f"FAILED: {f}" for f in failures)
    lines.append("soak: " + ("failed" if failures else "passed"))
    summary = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(summary)
    print(summary, end="")

    # CPU as a rate: the differences of the cumulative seconds.
    with open(os.path.join(out, "cpu.csv"), "w") as f:
        for a, b in zip(rows, rows[1:]):
            f.write(f"{b[0]},{b[3] - a[3]:.3f},{b[6] - a[6]:.3f}\n")
    plot = f"""set terminal pngcairo size 1200,800 font "DejaVu Sans,10" noenhanced
set output "{out}/soak.png"
set datafile separator ","
set multiplot layout 3,1 title "soak: http_server and echo_server under load_tester with chaos clients and chaos proxies ({seconds} s)"
set key top left
set xlabel "seconds"
set ylabel "RSS (MiB)"
plot "{out}/samples.csv" every ::1 using 1:($2/1048576) with lines title "http_server", "" every ::1 using 1:($5/1048576) with lines title "echo_server"
set ylabel "descriptors"
plot "{out}/samples.csv" every ::1 using 1:3 with lines title "http_server", "" every ::1 using 1:6 with lines title "echo_server"
set ylabel "CPU (cores)"
plot "{out}/cpu.csv" using 1:2 with lines title "http_server", "" using 1:3 with lines title "echo_server"
unset multiplot
"""
    subprocess.run(["gnuplot"], input=plot, text=True, check=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
