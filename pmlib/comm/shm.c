/*
 * Memories shared by the hosts of one machine. When every host of the job
 * runs on one machine, host 0 may place a memory's bytes in a memory file
 * (memfd) that the other hosts map as their mirror of it: their subtasks
 * then read and write host 0's bytes in place, as a stub of host 0 would,
 * and nothing crosses between the processes. A host maps the file through
 * /proc/<host 0's pid>/fd/<fd>, which the kernel allows a process of the
 * same user (as it allows process_vm_readv, comm/bulk.c). A collective
 * probe at start-up decides, for the whole job, whether memories are
 * shared: every host must map a file host 0 made and read what host 0
 * wrote in it. PMLIB_SHM=0 on any host turns sharing off for the job.
 * The probe's file stays mapped on every host as the machine's table
 * (pm__shm_table), where the GPUs of the hosts say what their mirrors hold
 * (data/node.c).
 */
#define _GNU_SOURCE
#include "comm/transport.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <unistd.h>

static struct {
    bool on;
    pid_t pid0;  /* host 0's process */
    void *probe; /* the probe's file, mapped while the job runs */
} S;

enum { TABLE_AT = 4096, PROBE = TABLE_AT + PM__SHM_TABLE_BYTES };

/* A memory file of `bytes` mapped here, or NULL (*fd -1). */
static void *create(size_t bytes, int *fd)
{
    *fd = memfd_create("pmlib-memory", MFD_CLOEXEC);
    if (*fd < 0)
        return NULL;
    /* The pages are taken now, as zeroing private memory took them: a file
     * page the system cannot give later would stop a subtask that touches
     * it with SIGBUS, where now the memory is made private instead. */
    void *p = MAP_FAILED;
    if (fallocate(*fd, 0, 0, (off_t)(bytes ? bytes : 1)) == 0)
        p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    if (p == MAP_FAILED) {
        close(*fd);
        *fd = -1;
        return NULL;
    }
    return p;
}

static void *map_peer(pid_t pid, int fd, size_t bytes)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
    int mine = open(path, O_RDWR | O_CLOEXEC);
    if (mine < 0)
        return NULL;
    struct stat st;
    void *p = MAP_FAILED;
    /* The file must be as large as host 0 said: a stale number (the
     * memory released and its fd reused) would name another file. */
    if (fstat(mine, &st) == 0 && (uint64_t)st.st_size >= (uint64_t)(bytes ? bytes : 1))
        p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_SHARED, mine, 0);
    close(mine); /* the mapping keeps the file */
    return p == MAP_FAILED ? NULL : p;
}

/* Host 0's memories each hold a descriptor while they live: let a program
 * of many memories have as many as the system allows it. */
static void raise_fd_limit(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &r);
    }
}

void pm__shm_probe(void)
{
    int n = pm__rt.nhosts, lsize = 1;
    MPI_Comm local;
    MPI_Comm_split_type(pm__bulk_comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &lsize);
    MPI_Comm_free(&local);
    int want = lsize == n && n > 1 && pm__env_uint("PMLIB_SHM", "0 or 1", 0, 1, 1) != 0, all = 0;
    MPI_Allreduce(&want, &all, 1, MPI_INT, MPI_MIN, pm__bulk_comm);
    if (!all)
        return;
    /* Host 0 makes a file with a number in it; every host maps it and reads it. */
    struct {
        int64_t pid, fd;
        uint64_t magic;
    } id = {0, -1, 0};
    void *mine = NULL;
    if (pm__rt.host == 0) {
        int fd;
        mine = create(PROBE, &fd);
        if (mine != NULL)
            id = (typeof(id)){(int64_t)getpid(), fd, 0x5deece66dULL ^ (uint64_t)(pm__now() * 1e9)};
        if (mine != NULL)
            memcpy(mine, &id.magic, sizeof id.magic);
    }
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, pm__bulk_comm);
    int ok = id.fd >= 0;
    if (ok && pm__rt.host != 0) {
        void *p = map_peer((pid_t)id.pid, (int)id.fd, PROBE);
        uint64_t v = 0;
        if (p != NULL)
            memcpy(&v, p, sizeof v);
        ok = v == id.magic;
        mine = p;
    }
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, pm__bulk_comm);
    if (pm__rt.host == 0 && mine != NULL)
        close((int)id.fd); /* every host has mapped it: the mappings keep it */
    S.on = all != 0;
    S.pid0 = (pid_t)id.pid;
    S.probe = mine;
    if (!S.on)
        pm__shm_fini();
    if (S.on && pm__rt.host == 0) {
        raise_fd_limit();
        pm__debug("memories: the %d hosts of this machine share host 0's memories in place", n);
    }
}

void *pm__shm_table(void)
{
    return S.on && S.probe != NULL ? (char *)S.probe + TABLE_AT : NULL;
}

void pm__shm_fini(void)
{
    if (S.probe != NULL)
        munmap(S.probe, PROBE);
    S.probe = NULL;
    S.on = false;
}

void *pm__shm_create(size_t bytes, int *fd)
{
    *fd = -1;
    return S.on && pm__rt.host == 0 ? create(bytes, fd) : NULL;
}

void *pm__shm_map(int fd, size_t bytes)
{
    return S.on && pm__rt.host != 0 && fd >= 0 ? map_peer(S.pid0, fd, bytes) : NULL;
}

void pm__shm_free(void *p, size_t bytes, int fd)
{
    if (p != NULL)
        munmap(p, bytes ? bytes : 1);
    if (fd >= 0)
        close(fd);
}
