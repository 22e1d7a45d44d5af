# Interpreter basics: os calls, json, files, time, random.
import json, os, random, tempfile, time

os.getpid(); os.getppid(); os.getuid(); os.getcwd(); os.uname()
os.cpu_count(); os.sched_getaffinity(0)
data = json.dumps({"pid": os.getpid(), "r": random.random(), "u": os.urandom(8).hex()})
with tempfile.TemporaryDirectory() as d:
    p = os.path.join(d, "f.json")
    with open(p, "w") as f:
        f.write(data)
    os.stat(p); os.listdir(d); os.rename(p, p + ".2")
    assert json.load(open(p + ".2"))["pid"] == os.getpid()
time.sleep(0.01); time.monotonic(); time.time()
print("ok")
