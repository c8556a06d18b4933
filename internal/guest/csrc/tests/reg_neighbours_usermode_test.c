/*
 * reg_neighbours_usermode_test.c: reg_neighbours_test's cases with the
 * guard an unprivileged process gets on Debian 12 (Linux 6.1,
 * vm.unprivileged_userfaultfd 0): a userfaultfd that holds user-mode
 * faults only, and pages never touched mapped before they are protected
 * (no UFFD_FEATURE_WP_UNPOPULATED before Linux 6.4). No user-mode write
 * is lost; a read(2) into the pages while they move may fail with EFAULT
 * (what it read stays in the pipe), but none is lost either.
 *
 * needs: daemon
 */
#define VRDMA_GUARD_USER_ONLY 1
#include "../mem.c"

#define KERNEL_WRITES_MAY_FAIL 1
#define ROUNDS 300 /* the loss itself is reg_neighbours_test's to show */
#include "reg_neighbours_test.c"
