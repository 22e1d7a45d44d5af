// System calls without the C library, for code that runs where it cannot
// be called: zspawn.c (in a template's memory, on PID 1's borrowed
// stack) and microbox exec's client (cmd/microbox/client.c, before the C
// library has started). A call returns what the kernel does: -errno on
// failure. x86_64 only.
#ifndef NSINIT_RAWSYS_H
#define NSINIT_RAWSYS_H

#define RAWSYS_INLINE static inline __attribute__((always_inline))

RAWSYS_INLINE long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}
#define sys(n, a, b, c) sys6(n, (long)(a), (long)(b), (long)(c), 0, 0, 0)

#endif
