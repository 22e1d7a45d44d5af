# asyncio and sockets on loopback: a TCP echo server and client, UDP, AF_UNIX,
# an asyncio subprocess and getaddrinfo("localhost").
import asyncio, socket, tempfile, os

async def echo(reader, writer):
    writer.write(await reader.readline()); await writer.drain(); writer.close()

async def main():
    srv = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"ping\n"); await w.drain()
    assert await r.readline() == b"ping\n"
    w.close(); srv.close(); await srv.wait_closed()
    proc = await asyncio.create_subprocess_exec("/bin/echo", "a", stdout=asyncio.subprocess.PIPE)
    assert (await proc.communicate())[0] == b"a\n"
    await asyncio.sleep(0.01)

asyncio.run(main())

u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.sendto(b"d", u.getsockname())
assert u.recvfrom(10)[0] == b"d"
try:
    s6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); s6.close()
except OSError as e:  # no IPv6 in a netns is fine; the call must not be refused
    assert e.errno not in (1, 38), e
a, b = socket.socketpair(); a.send(b"x"); assert b.recv(1) == b"x"
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "s")
    ls = socket.socket(socket.AF_UNIX); ls.bind(path); ls.listen()
    cs = socket.socket(socket.AF_UNIX); cs.connect(path)
    conn, _ = ls.accept(); cs.send(b"u"); assert conn.recv(1) == b"u"
socket.getaddrinfo("localhost", 80)
# AI_ADDRCONFIG makes glibc probe NETLINK_ROUTE, which the filter refuses;
# glibc then assumes IPv4 and IPv6 are both configured.
assert socket.getaddrinfo("127.0.0.1", 80, flags=socket.AI_ADDRCONFIG)
assert socket.getaddrinfo("localhost", 80, flags=socket.AI_ADDRCONFIG)
socket.gethostname()
print("ok")
