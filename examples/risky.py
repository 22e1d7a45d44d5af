# Reaches for the system, for `microbox check` and --max-risk to score:
#   bin/microbox check examples/risky.py
import subprocess
import sys

expression = sys.argv[1] if len(sys.argv) > 1 else "6 * 7"
print(eval(expression))
print(subprocess.run(["echo", "done"], capture_output=True, text=True).stdout, end="")
