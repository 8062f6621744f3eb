"""Shared pieces of the deployment tests (tests/deploy/*_test.py).

The tests run under ctest (tests/deploy/CMakeLists.txt), which passes the
paths of the source tree and of the built binaries in the environment:
H3_SOURCE_DIR, H3_BUILD_DIR, H3_BIN, H3SERVE_BIN.
"""

import os
import pathlib
import queue
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import yaml

SOURCE_DIR = pathlib.Path(os.environ.get(
    "H3_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("H3_BUILD_DIR", SOURCE_DIR / "build"))
H3 = os.environ.get("H3_BIN", str(BUILD_DIR / "clients" / "h3"))
H3SERVE = os.environ.get("H3SERVE_BIN", str(BUILD_DIR / "server" / "h3serve"))
DEPLOY_DIR = SOURCE_DIR / "deploy"


def load_yaml_documents(path):
    """Every document of a YAML file, empty ones left out."""
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def run(argv, timeout=60, check=True):
    """Runs argv; returns (exit code, stdout and stderr together)."""
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"{argv} exited {done.returncode}:\n{done.stdout}")
    return done.returncode, done.stdout


def free_port():
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_model(directory):
    """A tiny model file without a tokenizer (prompts are token ids)."""
    path = os.path.join(directory, "tiny.h3")
    run([H3, "convert", str(SOURCE_DIR / "engine/testdata/tiny_p1.safetensors"),
         "-o", path, "--n-heads", "2", "--vocab-size", "61"])
    return path


def h3serve_defaults():
    """The defaults `h3serve --help` shows, by flag: {"--port": "50051", ...}
    from CLI11's "  --port INT:INT in [0 - 65535]=50051" lines."""
    _, text = run([H3SERVE, "--help"])
    return dict(re.findall(
        r"(?m)^\s+(--[\w-]+)\s+[A-Z:]+(?: in \[[^\]]*\])?=(\S+)", text))


class H3Serve:
    """h3serve as a subprocess on loopback, with free ports; with
    listen=False the flags alone say where it listens."""

    def __init__(self, flags, listen=True):
        argv = [H3SERVE] + list(flags)
        if listen:
            argv[1:1] = ["--host", "127.0.0.1", "--port", "0",
                         "--metrics-port", "0", "--http-port", "0"]
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        self.lines = queue.Queue()
        self.output = []
        threading.Thread(target=self._read, daemon=True).start()
        line = self.wait_for_line("listening:", 60)
        grpc = re.search(r"grpc=(\S+)", line or "")
        metrics = re.search(r"metrics=http://([^/\s]+)/metrics", line or "")
        if not grpc or not metrics:
            self.stop()
            raise AssertionError("h3serve did not start:\n" + "".join(self.output))
        self.address = grpc.group(1)                 # HOST:PORT of gRPC
        self.metrics_address = metrics.group(1)      # HOST:PORT of /metrics

    def _read(self):
        for line in self.process.stdout:
            self.output.append(line)
            self.lines.put(line)

    def wait_for_line(self, needle, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                if self.process.poll() is not None:
                    return None
                continue
            if needle in line:
                return line
        return None

    def metrics_text(self):
        url = f"http://{self.metrics_address}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode()

    def stop(self):
        """SIGTERM (drain), then the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def exported_metric_names(metrics_text):
    """Families (# TYPE lines) and sample names (name, name_bucket, ...) of a
    Prometheus text exposition."""
    names = set()
    for line in metrics_text.splitlines():
        if line.startswith("# TYPE "):
            names.add(line.split()[2])
        elif line and not line.startswith("#"):
            names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return names


def metric_samples(metrics_text):
    """{series as written: value} of a Prometheus text exposition."""
    samples = {}
    for line in metrics_text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            samples[series] = float(value)
    return samples
