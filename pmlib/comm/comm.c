/*
 * The only code that calls MPI. A program started without a launcher is one
 * host and never touches MPI; under mpirun every rank is a host.
 */
#include "core/internal.h"

#include <stdlib.h>

#include <mpi.h>

static int we_initialized_mpi;

/* Whether an MPI launcher started this process (Open MPI, PMIx, PMI). */
static int launched_by_mpi(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL ||
           getenv("PMI_SIZE") != NULL;
}

int pm__comm_init(int *argc, char ***argv, int *host, int *nhosts)
{
    int inited = 0, provided = 0, rank = 0, size = 1;
    *host = 0;
    *nhosts = 1;
    if (!launched_by_mpi())
        return 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            return PM__FAIL(PM_EMPI, "pm_init: MPI_Init_thread failed; check the mpirun command line");
        we_initialized_mpi = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) {
        int rc = PM__FAIL(PM_ENOTSUP, "pm_init: started as rank %d of %d, but this build of pmlib runs "
                          "on one host only; start one process (or mpirun -n 1)", rank, size);
        pm__comm_finalize();
        return rc;
    }
    *host = rank;
    *nhosts = size;
    return 0;
}

void pm__comm_finalize(void)
{
    if (we_initialized_mpi) {
        MPI_Finalize();
        we_initialized_mpi = 0;
    }
}
