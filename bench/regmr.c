/*
 * regmr.c: the cost of ibv_reg_mr + ibv_dereg_mr, on whatever libibverbs
 * the loader finds (vrdma's under `vrdma run`, rdma-core's with rdma_rxe in
 * the interop guest). Build and run:
 *   cc -O2 -o /tmp/regmr bench/regmr.c -libverbs
 *   vrdma run -- /tmp/regmr [device] [rounds]
 * For each size it allocates a fresh page-aligned buffer, touches every
 * page, then times `rounds` registrations and deregistrations of it and
 * prints the median and the minimum, in microseconds:
 *   regmr <device> <size> median_us <m> min_us <n> rounds <r>
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
	const char *want = argc > 1 ? argv[1] : NULL;
	int rounds = argc > 2 ? atoi(argv[2]) : 21;
	static const size_t sizes[] = {4096, 1 << 20, 64 << 20};
	if (rounds < 1 || rounds > 10000) {
		fprintf(stderr, "regmr: rounds must be 1..10000\n");
		return 2;
	}
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = NULL;
	for (int i = 0; list != NULL && i < n; i++)
		if (want == NULL || strcmp(ibv_get_device_name(list[i]), want) == 0) {
			dev = list[i];
			break;
		}
	if (dev == NULL) {
		fprintf(stderr, "regmr: no device%s%s\n", want ? " named " : "", want ? want : "");
		return 1;
	}
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (pd == NULL) {
		perror("regmr: opening the device");
		return 1;
	}
	double *t = calloc((size_t)rounds, sizeof *t);
	if (t == NULL)
		return 1;
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		char *buf = NULL;
		if (posix_memalign((void **)&buf, 4096, sizes[s]) != 0) {
			fprintf(stderr, "regmr: no memory for %zu bytes\n", sizes[s]);
			return 1;
		}
		memset(buf, 1, sizes[s]);
		for (int r = 0; r < rounds; r++) {
			double t0 = now_us();
			struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizes[s],
						       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
			if (mr == NULL) {
				perror("regmr: ibv_reg_mr");
				return 1;
			}
			if (ibv_dereg_mr(mr) != 0) {
				perror("regmr: ibv_dereg_mr");
				return 1;
			}
			t[r] = now_us() - t0;
		}
		qsort(t, (size_t)rounds, sizeof *t, cmp);
		printf("regmr %s %zu median_us %.1f min_us %.1f rounds %d\n", ibv_get_device_name(dev), sizes[s],
		       t[rounds / 2], t[0], rounds);
		free(buf);
	}
	free(t);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
