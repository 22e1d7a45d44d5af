// MBX1: how `microbox exec`'s client (client.c) hands its run to a
// `microbox serve` (internal/server/protocol.go, the Go side of the same
// protocol; internal/server/clientc_test.go holds the two equal).
//
// The client connects to the SOCK_STREAM socket SOCKET_ENV names
// (DEFAULT_SOCKET when unset; set to "" it turns the client off) and sends:
//   header: SERVE_MAGIC (4 bytes, the last the version), u32 body length;
//           SERVE_HEADER bytes in one sendmsg, with SCM_RIGHTS carrying
//           the client's descriptors 0, 1 and 2
//   body:   str(working directory) list(exec's arguments, "exec" first)
//           list(the NAME=value variables exec reads: client.c's wanted)
//           str := u32 length, bytes    list := u32 count, str*
// All integers little-endian. The server answers with a u32: the run's
// exit status, or SERVE_FALLBACK, "run it yourself" (nothing has run).
// A client that shuts its side of the connection asks for the run's end.
#ifndef MICROBOX_MBX1_H
#define MICROBOX_MBX1_H

#define SOCKET_ENV "MICROBOX_SOCKET"
#define DEFAULT_SOCKET "/run/microbox/exec.sock"
#define SERVE_MAGIC "MBX1"         // opens the request; its last byte is the version
#define SERVE_HEADER 8             // the magic and the body's length
#define SERVE_FALLBACK 0xFFFFFFFFu // the server's "run it yourself"

#endif
