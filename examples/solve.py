# Reads a number n on stdin and prints the sum 1 + 2 + ... + n:
#   echo 5 | bin/microbox exec --timeout 5s examples/solve.py
import sys

n = int(sys.stdin.read())
print(sum(range(1, n + 1)))
