"""Starts a `microbox serve --http` for the Python client's tests."""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time


class Server:
    """A server of the tests' own: `microbox serve --http ADDR`, ADDR a
    Unix socket in a private directory, or TCP when tcp is set (its port
    read from the log). stop() ends it with SIGTERM."""

    def __init__(self, microbox, tcp=False, args=()):
        self.dir = tempfile.mkdtemp(prefix="microbox-pytest-")
        os.chmod(self.dir, 0o700)
        addr = "127.0.0.1:0" if tcp else "unix:" + os.path.join(self.dir, "http.sock")
        cmd = [microbox, "serve", "--socket", os.path.join(self.dir, "exec.sock"), "--http", addr, "--warm", "1"]
        env = dict(os.environ, MICROBOX_ROOTFS="")
        self.proc = subprocess.Popen(cmd + list(args), stderr=subprocess.PIPE, env=env)
        self.log = []
        found = threading.Event()

        def read():
            for line in iter(self.proc.stderr.readline, b""):
                text = line.decode("utf-8", "replace")
                self.log.append(text)
                m = re.search(r"serving the HTTP API on (\S+)", text)
                if m:
                    self.url = m.group(1)
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(20):
            self.stop()
            raise RuntimeError("microbox serve --http did not listen:\n" + "".join(self.log))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)
