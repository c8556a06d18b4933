/*
 * reg_mr.c: the cost of ibv_reg_mr + ibv_dereg_mr on malloc'd memory
 * (docs/design/guest-memory.md), against whichever libibverbs it is run
 * with: bench/reg_mr.sh runs it on vrdma's guest library. Prints, per
 * size, the median of REPS register/deregister pairs in microseconds, as a
 * JSON line. Build: cc -O2 -o reg_mr bench/reg_mr.c -libverbs
 */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 21;
	const char *label = argc > 2 ? argv[2] : "vrdma";
	int n = 0;
	struct ibv_device **devs = ibv_get_device_list(&n);
	if (!devs || n == 0) {
		fprintf(stderr, "reg_mr: no RDMA device\n");
		return 1;
	}
	struct ibv_context *ctx = ibv_open_device(devs[0]);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd) {
		fprintf(stderr, "reg_mr: cannot open %s\n", ibv_get_device_name(devs[0]));
		return 1;
	}
	static const size_t sizes[] = {4 << 10, 1 << 20, 64 << 20};
	double *t = calloc((size_t)reps, sizeof *t), *tr = calloc((size_t)reps, sizeof *tr),
	       *td = calloc((size_t)reps, sizeof *td);
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t len = sizes[i];
		char *buf = malloc(len);
		memset(buf, 1, len); /* touched, as an application's buffer is */
		for (int r = 0; r < reps; r++) {
			double t0 = now_us();
			struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
			if (!mr) {
				perror("ibv_reg_mr");
				return 1;
			}
			double t1 = now_us();
			if (ibv_dereg_mr(mr)) {
				perror("ibv_dereg_mr");
				return 1;
			}
			t[r] = now_us() - t0;
			tr[r] = t1 - t0;
			td[r] = t[r] - tr[r];
		}
		qsort(t, (size_t)reps, sizeof *t, cmp);
		qsort(tr, (size_t)reps, sizeof *tr, cmp);
		qsort(td, (size_t)reps, sizeof *td, cmp);
		printf("{\"source\":\"%s\",\"bytes\":%zu,\"reg_dereg_us\":%.1f,\"min_us\":%.1f,\"reg_us\":%.1f,"
		       "\"dereg_us\":%.1f,\"reps\":%d}\n",
		       label, len, t[reps / 2], t[0], tr[reps / 2], td[reps / 2], reps);
		free(buf);
	}
	free(t);
	free(tr);
	free(td);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	return 0;
}
