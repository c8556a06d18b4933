/*
 * mem_maps_text_test.c: verbs_test's cases of ibv_reg_mr and fork with the
 * library reading the mappings under a registration from the text of
 * /proc/self/maps, as it does on kernels without the PROCMAP_QUERY ioctl
 * (before Linux 6.11): protection kept, memory reallocated at the same
 * address, shared mappings refused and huge pages moved, overlaps, stacks.
 *
 * needs: daemon
 */
#define VRDMA_MEM_MAPS_TEXT 1
#include "../mem.c"

#define main verbs_main
#include "verbs_test.c"
#undef main

int main(void)
{
	char prog[] = "mem_maps_text_test", reg[] = "reg_mr", fork[] = "fork";
	char *argv[] = {prog, reg, fork, NULL};
	return verbs_main(3, argv);
}
