/*
 * The data layer: where the bytes of each memory are between hosts. Host 0
 * keeps the directory (dir.h: per memory, the ranges other hosts hold);
 * other hosts keep mirrors; a place fetches what it lacks from the holder.
 * Built on the transport (comm/comm.h), below the task protocol.
 */
#ifndef PMLIB_DATA_DATA_H
#define PMLIB_DATA_DATA_H

#include "comm/comm.h"

/* Its messages (the transport's tags for the layers above it). */
enum { PM__TAG_DATA_REQ = PM__TAG_USER, PM__TAG_DATA_REPLY, PM__TAG_MEM_RELEASE, PM__TAG_MEM_CREATED };

struct pm__accset;
struct pm__holders;

/* Registers its handlers and its memory hooks (before the transport starts);
 * frees the mirrors and what it knew (after the transport stopped). */
void pm__data_init(void);
void pm__data_fini(void);

/* Other hosts: the mirror of a memory at `version`, valid where host 0's
 * directory `away` says this host holds it (which also names the holders);
 * share >= 0: host 0's memory file, which a new mirror maps (comm/shm.c). */
pm__memory_t *pm__data_mirror(uint64_t handle, size_t bytes, uint64_t version,
                              const struct pm__holders *away, int share);
/* The directory of a memory in a task message, with its file when shared,
 * and back (checked). */
void pm__data_put_away(pm__wbuf_t *b, pm__memory_t *m);
int pm__data_get_away(pm__rbuf_t *m, uint64_t bytes, struct pm__holders *away, int *share);
/* Host 0 forgets who asked for a memory's ranges (handle; 0: all). */
void pm__data_relay_forget(uint64_t handle);
/* Small inputs of host h's share ride in its task message. */
void pm__data_put_push(pm__wbuf_t *b, const pm__task_t *t, int h);
int pm__data_take_push(pm__rbuf_t *m, pm__task_t *t);
/* A chunk's missing inputs: start fetching (NULL: nothing to fetch); wait
 * for a started fetch and fetch the rest; whether a fetch has landed. */
int pm__data_prefetch(pm__task_t *t, uint64_t chunk, pm__fetch_t **f);
int pm__data_fetch(pm__task_t *t, uint64_t chunk, pm__fetch_t *started);
bool pm__data_fetched(pm__fetch_t *f);
/* A chunk's written ranges: appended to a report with their bytes' place
 * (*segs, the caller frees it; returns payload flags), and taken at host 0
 * (where their bytes go; NULL when the task has failed). */
int pm__data_put_writes(pm__wbuf_t *b, pm__task_t *t, uint64_t chunk, pm__seg_t **segs, int *nseg);
pm__seg_t *pm__data_get_writes(pm__rbuf_t *m, pm__task_t *t, int src, int *nseg);
/* Counts a payload this host received from host src for task t. */
void pm__data_count(pm__task_t *t, int src, uint64_t raw, uint64_t wire);
void pm__data_put_accset(pm__wbuf_t *b, pm__task_t *t, const struct pm__accset *acc);
struct pm__accset *pm__data_get_accset(pm__rbuf_t *m, pm__task_t *t, int src);
/* Host 0: whether m's ranges are away, and whether its own chunks read such. */
bool pm__data_is_away(pm__memory_t *m);
bool pm__data_home_reads(pm__memory_t *m);
/* Host 0's chunks of a task that reads ranges away record what they wrote. */
void pm__data_home_wrote(pm__task_t *t, uint64_t chunk);

#endif /* PMLIB_DATA_DATA_H */
