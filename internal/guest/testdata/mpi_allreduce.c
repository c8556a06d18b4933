/*
 * mpi_allreduce: the smallest MPI program that initialises Open MPI's
 * transports and uses them (tools_openmpi_test.go): each rank adds its
 * rank; rank 0 prints the sum.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int rank = 0, size = 0, sum = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("ranks=%d sum=%d\n", size, sum);
	MPI_Finalize();
	return 0;
}
