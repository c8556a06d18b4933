/*
 * guest_mem.c: how the daemon could reach an application's registered
 * memory, measured (docs/design/guest-memory.md). Build and run:
 *   cc -O2 -D_GNU_SOURCE -o /tmp/guest_mem bench/guest_mem.c && /tmp/guest_mem
 * Prints, per size: memcpy between two mappings (what the daemon does on
 * a shared memfd), process_vm_writev into another process (the daemon
 * writing a peer's WRITE into the application without shared memory), and
 * the one-time cost of moving pages into a memfd at the same address (what
 * ibv_reg_mr does).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void *anon(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

static double move_to_memfd(char *p, size_t n)
{
	double t0 = now();
	int fd = memfd_create("m", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)n))
		exit(1);
	char *tmp = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	struct iovec l = {tmp, n}, r = {p, n};
	if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != (ssize_t)n)
		memcpy(tmp, p, n);
	if (mmap(p, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
		exit(1);
	munmap(tmp, n);
	close(fd);
	return now() - t0;
}

int main(void)
{
	size_t sizes[] = {4096, 64 << 10, 1 << 20, 64 << 20};
	printf("%-10s %14s %18s %16s\n", "size", "memcpy GB/s", "vm_writev GB/s", "memfd move us");
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t n = sizes[i];
		char *a = anon(n), *b = anon(n);
		memset(a, 1, n);
		int iters = (int)((1u << 30) / n);
		if (iters > 200000)
			iters = 200000;
		double t0 = now();
		for (int k = 0; k < iters; k++) {
			memcpy(b, a, n);
			__asm__ volatile("" ::: "memory");
		}
		double mc = (double)n * iters / (now() - t0) / 1e9;
		/* A child holds the target buffer; we write into it. */
		char *c = anon(n);
		pid_t pid = fork();
		if (pid == 0) {
			pause();
			_exit(0);
		}
		struct iovec l = {a, n}, r = {c, n};
		t0 = now();
		for (int k = 0; k < iters; k++)
			if (process_vm_writev(pid, &l, 1, &r, 1, 0) != (ssize_t)n) {
				perror("process_vm_writev");
				break;
			}
		double vw = (double)n * iters / (now() - t0) / 1e9;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		double mv = 0;
		int moves = n >= (64u << 20) ? 3 : 50;
		for (int k = 0; k < moves; k++) {
			char *p = anon(n);
			mv += move_to_memfd(p, n);
			munmap(p, n);
		}
		printf("%-10zu %14.2f %18.2f %16.1f\n", n, mc, vw, mv / moves * 1e6);
		munmap(a, n);
		munmap(b, n);
		munmap(c, n);
	}
	return 0;
}
