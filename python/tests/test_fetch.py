"""Files in and out through the Python client: files_base64 and fetch,
every byte value, by a subprocess and direct to a server."""

import base64
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import microbox  # noqa: E402
from microbox import execute_code  # noqa: E402
from serverutil import Server  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
ALL_BYTES = bytes(range(256))
COPY = "open('out.bin', 'wb').write(open('in.bin', 'rb').read())"


def setUpModule():
    default = os.path.join(REPO, "bin", "microbox")
    if "MICROBOX" not in os.environ and os.path.exists(default):
        os.environ["MICROBOX"] = default
    microbox.find_microbox()


class FetchTest(unittest.TestCase):
    def check(self, **where):
        r = execute_code(COPY, timeout=5, files_base64={"in.bin": base64.b64encode(ALL_BYTES).decode()},
                         fetch=["out.bin", "missing"], **where)
        self.assertEqual(r.status, "ok", r.error)
        fetched = r.raw["fetched"]
        self.assertEqual(base64.b64decode(fetched["out.bin"]["base64"]), ALL_BYTES)
        self.assertIn("missing", fetched["missing"]["error"])

    def test_subprocess(self):
        self.check()

    def test_direct(self):
        server = Server(os.environ["MICROBOX"])
        try:
            self.check(server=server.url)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()
