# A first program for microbox: prints where it runs and what it may do.
import os
import socket

print("hello from", socket.gethostname(), "as uid", os.getuid())
print("processes I can see:", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
try:
    open("/usr/lib/probe", "w")
except OSError as e:
    print("the root filesystem is read-only:", e.strerror)
