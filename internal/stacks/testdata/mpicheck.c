/* mpicheck: the MPI program of internal/stacks' tests. Every rank checks
 * the results of point-to-point messages (a ring, at sizes on both sides
 * of UCX's rendezvous threshold), MPI_Allreduce, MPI_Alltoall, MPI_Bcast
 * and one-sided MPI_Put/MPI_Get, against what it computes itself; rank 0
 * prints "mpicheck: OK ranks=N" when all ranks agree, else the first
 * mismatch, and the exit status is non-zero.
 *
 * With -pingpong BYTES ITERS (2 ranks) it instead times a ping-pong of
 * BYTES-byte messages between ranks 0 and 1 and rank 0 prints
 * "pingpong: BYTES bytes ITERS iters MB/s X" (one-way bandwidth). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;
static int failures;

static void fail(const char *what, long i, long got, long want)
{
	if (failures++ < 5)
		fprintf(stderr, "mpicheck: rank %d: %s: element %ld is %ld, want %ld\n", rank, what, i, got, want);
}

static uint8_t pattern(int from, int to, long i)
{
	return (uint8_t)(from * 31 + to * 7 + i * 13 + (i >> 12));
}

static void ring(long n)
{
	uint8_t *out = malloc((size_t)n), *in = malloc((size_t)n);
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	if (!out || !in) {
		fail("ring: malloc", n, 0, 1);
		return;
	}
	for (long i = 0; i < n; i++)
		out[i] = pattern(rank, next, i);
	memset(in, 0, (size_t)n);
	MPI_Sendrecv(out, (int)n, MPI_BYTE, next, 1, in, (int)n, MPI_BYTE, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	for (long i = 0; i < n; i++)
		if (in[i] != pattern(prev, rank, i)) {
			fail("ring", i, in[i], pattern(prev, rank, i));
			break;
		}
	free(out);
	free(in);
}

static void allreduce(long n)
{
	long *v = malloc((size_t)n * sizeof *v), *r = malloc((size_t)n * sizeof *r);
	if (!v || !r) {
		fail("allreduce: malloc", n, 0, 1);
		return;
	}
	for (long i = 0; i < n; i++)
		v[i] = (long)rank * 1000003 + i;
	MPI_Allreduce(v, r, (int)n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	long ranks = (long)size * (size - 1) / 2;
	for (long i = 0; i < n; i++)
		if (r[i] != ranks * 1000003 + (long)size * i) {
			fail("allreduce", i, r[i], ranks * 1000003 + (long)size * i);
			break;
		}
	free(v);
	free(r);
}

static void alltoall(long per)
{
	long total = per * size;
	int *s = malloc((size_t)total * sizeof *s), *r = malloc((size_t)total * sizeof *r);
	if (!s || !r) {
		fail("alltoall: malloc", total, 0, 1);
		return;
	}
	for (int to = 0; to < size; to++)
		for (long i = 0; i < per; i++)
			s[to * per + i] = rank * 100000 + to * 1000 + (int)(i % 1000);
	MPI_Alltoall(s, (int)per, MPI_INT, r, (int)per, MPI_INT, MPI_COMM_WORLD);
	for (int from = 0; from < size; from++)
		for (long i = 0; i < per; i++) {
			int want = from * 100000 + rank * 1000 + (int)(i % 1000);
			if (r[from * per + i] != want) {
				fail("alltoall", from * per + i, r[from * per + i], want);
				from = size;
				break;
			}
		}
	free(s);
	free(r);
}

static void bcast(long n, int root)
{
	uint8_t *b = malloc((size_t)n);
	if (!b) {
		fail("bcast: malloc", n, 0, 1);
		return;
	}
	for (long i = 0; i < n; i++)
		b[i] = rank == root ? pattern(root, 99, i) : 0;
	MPI_Bcast(b, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
	for (long i = 0; i < n; i++)
		if (b[i] != pattern(root, 99, i)) {
			fail("bcast", i, b[i], pattern(root, 99, i));
			break;
		}
	free(b);
}

/* onesided: each rank puts its pattern into the next rank's window, then
 * gets the previous rank's window back, both under fences. */
static void onesided(long n)
{
	long *base;
	MPI_Win win;
	MPI_Win_allocate((MPI_Aint)(n * (long)sizeof(long)), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	long *src = malloc((size_t)n * sizeof *src), *got = malloc((size_t)n * sizeof *got);
	if (!src || !got) {
		fail("onesided: malloc", n, 0, 1);
		return;
	}
	for (long i = 0; i < n; i++) {
		src[i] = (long)rank << 32 | i;
		base[i] = -1;
	}
	MPI_Win_fence(0, win);
	MPI_Put(src, (int)n, MPI_LONG, next, 0, (int)n, MPI_LONG, win);
	MPI_Win_fence(0, win);
	for (long i = 0; i < n; i++)
		if (base[i] != ((long)prev << 32 | i)) {
			fail("put", i, base[i], (long)prev << 32 | i);
			break;
		}
	MPI_Win_fence(0, win);
	MPI_Get(got, (int)n, MPI_LONG, prev, 0, (int)n, MPI_LONG, win);
	MPI_Win_fence(0, win);
	/* prev's window holds what prev's own previous rank put there. */
	int pprev = (prev + size - 1) % size;
	for (long i = 0; i < n; i++)
		if (got[i] != ((long)pprev << 32 | i)) {
			fail("get", i, got[i], (long)pprev << 32 | i);
			break;
		}
	MPI_Win_free(&win);
	free(src);
	free(got);
}

static int pingpong(long n, int iters)
{
	char *buf = malloc((size_t)n);
	if (!buf)
		return 1;
	memset(buf, rank, (size_t)n);
	for (int warm = 0; warm < 2; warm++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		int count = warm ? iters : 10;
		for (int i = 0; i < count; i++) {
			if (rank == 0) {
				MPI_Send(buf, (int)n, MPI_BYTE, 1, 2, MPI_COMM_WORLD);
				MPI_Recv(buf, (int)n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else if (rank == 1) {
				MPI_Recv(buf, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Send(buf, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
			}
		}
		double t = MPI_Wtime() - t0;
		if (warm && rank == 0)
			printf("pingpong: %ld bytes %d iters MB/s %.3f\n", n, iters, 2.0 * n * iters / t / 1e6);
	}
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc == 4 && strcmp(argv[1], "-pingpong") == 0) {
		int rc = pingpong(atol(argv[2]), atoi(argv[3]));
		MPI_Finalize();
		return rc;
	}
	static const long sizes[] = {8, 4096, 65536, 1 << 20, 4 << 20};
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		ring(sizes[k]);
		allreduce(sizes[k] / 8 + 1);
		alltoall(sizes[k] / 64 + 1);
		bcast(sizes[k], (int)(k % (size_t)size));
	}
	onesided(1);
	onesided(65536);
	onesided(1 << 18);
	int all = 0;
	MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) {
		if (all == 0)
			printf("mpicheck: OK ranks=%d\n", size);
		else
			printf("mpicheck: FAILED ranks=%d failures=%d\n", size, all);
	}
	MPI_Finalize();
	return all != 0;
}
