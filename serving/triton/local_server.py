"""A Triton Inference Server on this machine with the tcinfer backend, for the tests and the
benchmarks (tests/serving/test_triton.py, bench/triton_gpu.py): the server binary of the PyPI
package nvidia-pytriton, free ports of 127.0.0.1, the start, the readiness wait and the stop.

    server = LocalServer(repo, "build/triton_backends", log_path)
    try:
        client = tritonclient.grpc.InferenceServerClient(server.grpc_url)
        server.wait_ready(lambda: client.is_server_ready() and client.is_model_ready("m"), 60)
        ...
    finally:
        server.stop()
"""
import importlib.util
import os
import socket
import subprocess
import time


def free_ports(count):
    """count distinct ports of 127.0.0.1 that were free a moment ago."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def find_tritonserver(site_packages=None):
    """(server binary, folder of its shared libraries) of nvidia-pytriton: in site_packages (a
    folder holding pytriton/ and nvidia_pytriton.libs/, installed or unpacked), else in this
    Python's installation (found without importing pytriton, whose own dependencies are not
    needed). A missing part is a RuntimeError naming it."""
    if site_packages:
        package = os.path.join(site_packages, "pytriton")
    else:
        spec = importlib.util.find_spec("pytriton")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError("nvidia-pytriton is not installed in this Python "
                               "(tests/requirements.txt)")
        package = spec.submodule_search_locations[0]
    binary = os.path.join(package, "tritonserver", "bin", "tritonserver")
    libs = os.path.join(os.path.dirname(package), "nvidia_pytriton.libs")
    for path in (binary, libs):
        if not os.path.exists(path):
            raise RuntimeError(f"{path} is missing from the nvidia-pytriton installation")
    return binary, libs


class LocalServer:
    """tritonserver serving repo with the backends of backend_dir on free ports of 127.0.0.1
    (http_port, grpc_port, metrics_port; http_url, grpc_url), its output in log_path. Started by
    the constructor; stop() ends it (also after a failed start)."""

    def __init__(self, repo, backend_dir, log_path, site_packages=None, extra_args=()):
        binary, libs = find_tritonserver(site_packages)
        self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
        self.http_url = f"127.0.0.1:{self.http_port}"
        self.grpc_url = f"127.0.0.1:{self.grpc_port}"
        self.log_path = log_path
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = libs + os.pathsep + env.get("LD_LIBRARY_PATH", "")
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(
            [binary, "--model-repository", repo, "--backend-directory", backend_dir,
             "--http-address", "127.0.0.1", "--http-port", str(self.http_port),
             "--grpc-address", "127.0.0.1", "--grpc-port", str(self.grpc_port),
             "--metrics-address", "127.0.0.1", "--metrics-port", str(self.metrics_port),
             "--exit-timeout-secs", "5", *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.started = time.monotonic()

    def log_text(self, tail=6000):
        """The server's output so far: its last tail characters (None: all of it)."""
        self.log.flush()
        with open(self.log_path) as f:
            text = f.read()
        return text[-tail:] if tail else text

    def wait_ready(self, is_ready, timeout_s, poll_s=0.2):
        """Polls is_ready() (a client's readiness check; its exceptions count as not ready)
        until it holds. The server exiting first, or timeout_s passing, is a RuntimeError with
        the end of the server's log. Returns the seconds since the start."""
        deadline = self.started + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"tritonserver exited at start ({self.process.returncode}):\n"
                                   + self.log_text())
            try:
                if is_ready():
                    return time.monotonic() - self.started
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"tritonserver not ready within {timeout_s} s:\n"
                                   + self.log_text())
            time.sleep(poll_s)

    def stop(self, timeout_s=15):
        """Ends the server (terminate, then kill after timeout_s) and closes its log."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if not self.log.closed:
            self.log.close()
