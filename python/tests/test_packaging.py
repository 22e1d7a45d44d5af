"""The in-tree build backend makes a correct wheel (pip install ./python)."""

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(PYTHON_DIR, "_build"))

import microbox_build  # noqa: E402


class WheelTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def test_wheel(self):
        name = microbox_build.build_wheel(self.dir)
        self.assertEqual(name, "microbox-0.1.0-py3-none-any.whl")
        with zipfile.ZipFile(os.path.join(self.dir, name)) as z:
            names = set(z.namelist())
            for f in ("microbox/__init__.py", "microbox/client.py", "microbox/humaneval_harness.py",
                      "microbox/humaneval_judge.json", "microbox/mbpp_harness.py", "microbox/session.py",
                      "microbox-0.1.0.dist-info/METADATA", "microbox-0.1.0.dist-info/WHEEL"):
                self.assertIn(f, names)
            meta = z.read("microbox-0.1.0.dist-info/METADATA").decode()
            self.assertIn("Name: microbox\n", meta)
            self.assertIn("Requires-Python: >=3.8\n", meta)
            # Every file's RECORD line carries its hash and size.
            for line in z.read("microbox-0.1.0.dist-info/RECORD").decode().splitlines():
                path, digest, size = line.split(",")
                if path.endswith("RECORD"):
                    continue
                data = z.read(path)
                want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                self.assertEqual((digest, int(size)), ("sha256=" + want, len(data)), path)

    def test_editable(self):
        name = microbox_build.build_editable(self.dir)
        with zipfile.ZipFile(os.path.join(self.dir, name)) as z:
            self.assertEqual(z.read("microbox_editable.pth").decode().strip(), PYTHON_DIR)

    def test_pip_install(self):
        """pip install ./python in a fresh venv, with no package index."""
        venv = os.path.join(self.dir, "venv")
        made = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True)
        if made.returncode != 0:
            why = "python3 -m venv is not available (Debian: apt-get install python3-venv, as scripts/deps does)"
            if os.environ.get("CI"):
                self.fail("%s:\n%s" % (why, made.stderr))
            self.skipTest(why)
        pip = [os.path.join(venv, "bin", "python"), "-m", "pip"]
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        subprocess.run(pip + ["install", "-q", PYTHON_DIR], check=True, env=env)
        out = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                              "import microbox, os; print(os.path.dirname(microbox.__file__))"],
                             cwd="/", capture_output=True, text=True, check=True).stdout.strip()
        self.assertTrue(out.startswith(venv), out)


if __name__ == "__main__":
    unittest.main()
