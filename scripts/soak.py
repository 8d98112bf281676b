#!/usr/bin/env python3
"""A soak run: http_server and echo_server under load_tester for N minutes, with misbehaving
clients mixed in, sampled every second; fails when memory or descriptors grow after warm-up or
an unexpected error appears. Run through scripts/soak.sh, which builds the programs.

  soak.py BUILD_DIR OUT_DIR MINUTES

The load, on loopback only:
  - load_tester --mode http against http_server and --mode echo against echo_server, 32
    connections each, for the whole run: every request must be answered (errors=0);
  - chaos clients, a new one every 50 ms, in turn: a request sent one byte at a time with a
    pause between bytes; half a request, then silence (the server's request timeout closes it);
    a request, then a reset before the answer is read; a request, then a half-close; 4 KiB of
    garbage. Each misbehaving client is done when the server has closed its connection or after
    at most 4 s.
A 3 s burst of the same load comes first, so that the servers' lazily made descriptors exist
before the baseline is counted. Sampled every second for each server: resident memory (VmRSS), open descriptors
(/proc/PID/fd) and CPU (utime + stime). Warm-up is the first fifth of the run (at least 10 s).
Fails when, comparing the last quarter of the samples with the quarter after warm-up (medians),
memory grows by more than 10 % + 4 MiB or descriptors by more than 10 % + 8; when a server's
descriptors are not back to their count before the load within 10 s of its end (kind by kind;
only a loop's one precise-wake timerfd, one per server thread, may come late); when a
load_tester reports an error; when a server writes anything to stderr; or when a server does
not exit 0 on SIGTERM. Writes OUT_DIR/samples.csv, OUT_DIR/summary.txt and OUT_DIR/soak.png.
"""

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


def start_server(command):
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    match = re.search(r":(\d+)\s*$", line)
    if not match:
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


def median_of(values):
    return statistics.median(values) if values else 0


def main():
    build, out, minutes = sys.argv[1], sys.argv[2], float(sys.argv[3])
    os.makedirs(out, exist_ok=True)
    seconds = max(30, int(minutes * 60))
    warm_up = max(10, seconds // 5)
    examples = os.path.join(build, "examples")
    servers = {}
    servers["http_server"] = start_server(
        [os.path.join(examples, "http_server"), "--port", "0", "--threads", str(SERVER_THREADS),
         "--request-timeout-ms", "1000", "--idle-timeout-ms", "3000"])
    servers["echo_server"] = start_server(
        [os.path.join(examples, "echo_server"), "--port", "0", "--threads", str(SERVER_THREADS),
         "--idle-ms", "1000"])
    http_port, echo_port = servers["http_server"][1], servers["echo_server"][1]
    http_request = b"GET / HTTP/1.1\r\nHost: soak\r\n\r\n"
    chaos_targets = [(http_port, http_request), (echo_port, b"echo me\n" * 8)]

    def start_load(duration):
        load = {}
        for name, mode, port in (("http", "http", http_port), ("echo", "echo", echo_port)):
            load[name] = subprocess.Popen(
                [os.path.join(examples, "load_tester"), "--mode", mode, "--port", str(port),
                 "--connections", "32", "--duration", str(duration), "--timeout-ms", "5000",
                 "--max-seconds", str(duration + 60)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        stop = threading.Event()
        counts = {}
        chaos_thread = threading.Thread(target=chaos, args=(chaos_targets, stop, counts))
        chaos_thread.start()
        return load, stop, counts, chaos_thread

    # A 3 s burst first: each server thread makes its lazily made descriptors (a loop's
    # precise-wake timerfd, made at its first short timer) before the baseline is taken.
    load, stop, _, chaos_thread = start_load(3)
    time.sleep(3)
    stop.set()
    chaos_thread.join()
    for p in load.values():
        p.communicate(timeout=60)
    time.sleep(5)  # the chaos clients' connections end by the servers' timeouts
    before = {name: settled_descriptors(p.pid) for name, (p, _) in servers.items()}
    kinds_before = {name: descriptor_kinds(p.pid) for name, (p, _) in servers.items()}

    load, stop, counts, chaos_thread = start_load(seconds)

    rows = []
    start = time.monotonic()
    for tick in range(seconds):
        time.sleep(max(0.0, start + tick + 1 - time.monotonic()))
        row = [tick + 1]
        for name, (p, _) in servers.items():
            row.extend(sample(p.pid))
        rows.append(row)
    stop.set()
    chaos_thread.join()
    results = {name: p.communicate(timeout=120)[0] for name, p in load.items()}

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
    stderr = {}
    status = {}
    for name, (p, _) in servers.items():
        p.send_signal(signal.SIGTERM)
        _, stderr[name] = p.communicate(timeout=30)
        status[name] = p.returncode

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
set multiplot layout 3,1 title "soak: http_server and echo_server under load_tester with chaos clients ({seconds} s)"
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
