"""An h3serve process for the benchmark scripts: started with a bounded wait
for its "listening:" line, its /metrics scraped, and stopped."""
import os
import select
import subprocess
import sys
import time
import urllib.request


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def start(command, timeout):
    """Starts `command` (h3serve with --port 0 --metrics-port 0) and waits at
    most `timeout` seconds for it to listen. Returns (process, grpc port,
    metrics URL). Raises RuntimeError with the server's last output lines if
    it exits or stays silent."""
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # Unbuffered reads under select: a wait that ends at the deadline even
    # when the server prints nothing, and no line left unseen in a buffer.
    deadline = time.monotonic() + timeout
    fd, pending, lines = server.stdout.fileno(), b"", []
    while True:
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            line = line.decode(errors="replace")
            lines.append(line)
            if line.startswith("listening: grpc="):
                fields = line.split()
                port = int(fields[1].rsplit(":", 1)[1])
                metrics = [f for f in fields if f.startswith("metrics=")]
                return server, port, metrics[0].split("=", 1)[1] if metrics else None
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            reason = f"did not listen within {timeout:g} s"
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            reason = f"exited with status {server.wait()}"
            break
        pending += chunk
    server.kill()
    server.wait()
    tail = "\n".join(lines[-20:] + ([pending.decode(errors="replace")] if pending else []))
    raise RuntimeError(f"h3serve {reason}; its output:\n{tail}")


def stop(server, timeout=60):
    """SIGTERM (a drain), then SIGKILL after `timeout` seconds."""
    server.terminate()
    try:
        server.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def scrape(url):
    """The samples of a /metrics page, keyed by series as written."""
    values = {}
    with urllib.request.urlopen(url, timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("#") or " " not in line:
                continue
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def random_model(build, shape, timeout):
    """/tmp/h3-serve-bench/SHAPE.h3, a random fp32 model of a released shape
    (h3_engine_bench --what write-random), written if it is not there."""
    path = f"/tmp/h3-serve-bench/{shape}.h3"
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        subprocess.run([os.path.join(build, "bench", "h3_engine_bench"), "--what",
                        "write-random", "--random-shape", shape, "--model", path],
                       check=True, capture_output=True, timeout=timeout)
    return path
