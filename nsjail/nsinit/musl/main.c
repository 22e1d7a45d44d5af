// The main of microbox's init image: this package's C (../*.c) linked on
// its own against musl, statically (the Makefile's nsjail/nsinit/musl/init;
// ../image.go embeds it). A forked run's PID 1 execs it in place of
// microbox's own binary: the same code, started by musl's few
// instructions instead of glibc's static start, whose CPU-feature probing
// (cpuid, which a hypervisor traps) made most of that exec's cost on a VM
// (BENCHMARKS.md).
//
// Its role is init.c's constructor's, which runs before this main and
// never returns as a forked run's PID 1 (INIT_ENV=ZYGOTE_INIT). Any other
// start ends here: with "probe", the supervisor's check that this host
// lets it exec the image (0); otherwise a mistaken start (125).

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "probe") == 0)
		return 0;
	fputs("microbox's init image runs only as a forked run's PID 1, which microbox starts\n", stderr);
	return 125;
}
