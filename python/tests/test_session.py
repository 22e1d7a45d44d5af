"""microbox.Session and AsyncSession against a real `microbox serve
--http` (over its Unix socket, and TCP): state across cells, errors and
timeouts as answers, files byte-exact both ways, an ended session, and
close. Run as test_client.py is (make python-test)."""

import asyncio
import os
import sys
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import microbox  # noqa: E402
from microbox import AsyncSession, MicroboxError, Session, SessionEnded  # noqa: E402
from serverutil import Server  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))


def setUpModule():
    default = os.path.join(REPO, "bin", "microbox")
    if "MICROBOX" not in os.environ and os.path.exists(default):
        os.environ["MICROBOX"] = default
    microbox.find_microbox()


class SessionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(os.environ["MICROBOX"])
        cls.env = mock.patch.dict(os.environ, {"MICROBOX_URL": cls.server.url})
        cls.env.start()

    @classmethod
    def tearDownClass(cls):
        cls.env.stop()
        cls.server.stop()

    def test_state_kept_across_cells(self):
        with Session(mem="128M") as s:
            self.assertTrue(s.id.startswith("s-"))
            r = s.run("x = 41\ndef double(n):\n    return 2 * n")
            self.assertEqual((r.status, r.value, r.error), ("ok", None, None))
            r = s.run("print('hi'); double(x + 1)")
            self.assertEqual((r.status, r.stdout, r.value), ("ok", "hi\n", "84"))
            self.assertEqual(r.session["cells"], 2)
            self.assertEqual(s.run("input()", stdin="from stdin\n").value, "'from stdin'")

    def test_error_and_timeout_are_answers(self):
        with Session(mem="128M") as s:
            r = s.run("y = 1\n1 / 0")
            self.assertEqual((r.status, r.error["name"]), ("error", "ZeroDivisionError"))
            self.assertIn("1 / 0", r.error["traceback"])
            r = s.run("import time\nwhile True: time.sleep(0.01)", timeout=0.5)
            self.assertEqual(r.status, "timeout")
            self.assertEqual(s.run("y").value, "1")  # the session went on

    def test_files_round_trip_byte_exact(self):
        blob = bytes(range(256)) * 4
        with Session(mem="128M") as s:
            self.assertEqual(s.upload("in/blob.bin", blob), {"path": "in/blob.bin", "size": 1024})
            self.assertEqual(s.run("len(open('in/blob.bin', 'rb').read())").value, "1024")
            s.run("open('out.txt', 'w').write('héllo')")
            self.assertEqual(s.download("out.txt"), "héllo".encode())
            self.assertEqual(s.download("in/blob.bin"), blob)
            s.upload("t.txt", "text ✓")
            self.assertEqual(s.download("t.txt"), "text ✓".encode())
            self.assertIn({"path": "in/blob.bin", "size": 1024, "type": "file"}, s.files())
            s.delete_file("t.txt")
            with self.assertRaisesRegex(MicroboxError, "404"):
                s.download("t.txt")
            with self.assertRaisesRegex(MicroboxError, "400"):
                s.download("../etc/passwd")

    def test_close_ends_it(self):
        s = Session(mem="128M")
        info = s.close()
        self.assertEqual((info["state"], info["reason"]), ("ended", "deleted"))
        self.assertEqual(s.close(), info)  # twice is no error
        self.assertEqual(s.describe()["reason"], "deleted")
        with self.assertRaises(SessionEnded) as e:
            s.run("1")
        self.assertEqual(e.exception.info["reason"], "deleted")

    def test_session_ended_by_its_code(self):
        with Session(mem="128M") as s:
            r = s.run("import os; os._exit(3)")
            self.assertEqual((r.status, r.session["reason"]), ("ended", "exited"))
            with self.assertRaises(SessionEnded):
                s.run("1")

    def test_bad_options_name_the_key(self):
        with self.assertRaisesRegex(MicroboxError, "code"):
            Session(code="print(1)")
        with mock.patch.dict(os.environ, {"MICROBOX_URL": ""}):
            with self.assertRaisesRegex(MicroboxError, "MICROBOX_URL"):
                Session()

    def test_durations_in_seconds(self):
        with Session(mem="128M", idle_ttl=30, timeout=2.5) as s:
            self.assertEqual((s.info["limits"]["idle_ttl"], s.info["limits"]["timeout"]), ("30s", "2.5s"))

    def test_async(self):
        async def main():
            async with await AsyncSession.open(mem="128M") as s:
                await s.run("z = [1, 2]")
                await s.upload("a.bin", b"\x00\xff")
                return (await s.run("z + list(open('a.bin', 'rb').read())")).value

        self.assertEqual(asyncio.run(main()), "[1, 2, 0, 255]")


class SessionOverTCPTest(unittest.TestCase):
    def test_tcp(self):
        server = Server(os.environ["MICROBOX"], tcp=True)
        try:
            with Session(server=server.url, mem="128M") as s:
                s.run("a = 2")
                self.assertEqual(s.run("a ** 10").value, "1024")
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()
