# subprocess: fork/exec (vfork or clone), pipes, wait.
import subprocess, sys

out = subprocess.run(["/bin/echo", "hi"], capture_output=True, check=True).stdout
assert out == b"hi\n", out
out = subprocess.check_output([sys.executable, "-c", "print(6*7)"])
assert out.strip() == b"42", out
p = subprocess.Popen(["/bin/cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
assert p.communicate(b"x")[0] == b"x"
print("ok")
