/*
 * Where a task's chunks go between hosts. Host 0 weighs each host's speed
 * against what moving a chunk's data there costs (the bytes its
 * subscriptions name over the bandwidth the transport measured) and gives a
 * host only the chunks it finishes sooner than host 0 would.
 */
#ifndef PMLIB_SCHED_HOSTS_H
#define PMLIB_SCHED_HOSTS_H

#include "core/internal.h"

/* Bytes per second assumed between hosts until the transport has measured
 * the link. */
#define PM__HOST_BW_GUESS 1e9

/* Splits n chunks among nhosts so that the last host finishes as early as
 * possible, when host h finishes k chunks at lat[h] + k / rate[h] seconds
 * (rate in chunks per second; 0: the host takes none). Whole chunks: the
 * few that rounding leaves go one by one where they finish first. */
void pm__split_by_cost(int nhosts, const double *lat, const double *rate, uint64_t n,
                       uint64_t *count);

/* How many chunks a host with `theirs` chunks per second, `lat` seconds
 * away from its first result, should take of the `left` queued here, where
 * they run at `mine` chunks per second: the most that still lets it finish
 * no later than this host finishes the rest (0: none pays). */
uint64_t pm__grant_by_cost(double mine, double theirs, double lat, uint64_t left);

/* What involving host h in a task costs beyond running chunks and moving
 * bytes (messages, wake-ups), in seconds: seeded from a round trip at
 * start-up, then a running average of what host 0 observes but the first
 * sample, each counted as at most twice the average; with only_lower (a
 * host measured after tasks without it: a probe, or a share given again)
 * a lower sample is taken as it is, a higher one not at all (runtime
 * lock). */
void pm__hosts_overhead_init(int nhosts);
void pm__hosts_overhead_free(void);
void pm__hosts_seed_overhead(int h, double seconds);
void pm__hosts_note_overhead(int h, double seconds, bool only_lower);
double pm__hosts_overhead(int h);

/* Host 0 (runtime lock): the work placed on host h by the costs and not
 * yet finished, in seconds of its devices' time: a task placed adds what
 * its share takes there, and takes it back when it ends. Where several
 * tasks run at once, a host busy with earlier ones starts a new one's
 * chunks only that much later. */
void pm__hosts_backlog_add(int h, double seconds);
double pm__hosts_backlog(int h);

/* Host 0, after the costs gave host h chunks of a task (fed) or none:
 * whether h should get one anyway so that its overhead is measured again.
 * True after 16 tasks in a row without chunks, then after 32, and so on
 * up to 4096 (runtime lock). */
bool pm__hosts_probe_due(int h, bool fed);

/* Bytes per second to host h: as the transport measured, else the guess. */
double pm__hosts_bw(int h);

/* Seconds that moving `bytes` for a chunk of host h adds to its finish:
 * the bytes over the link's bandwidth, plus what host 0 learned that each
 * byte costs h beyond that (pm__hosts_note_finish). */
double pm__hosts_moving(int h, double bytes);

/* Host 0, as task t placed by cost ends well (runtime lock): host h
 * finished its `chunks` chunks `seconds` after the task started, where
 * its devices take chunk_s seconds per chunk. Beyond what the link and the
 * devices explain, the rest is taken for a cost of moving bytes there
 * (copies, a transport that shares the host's cores, chunks that wait for
 * their inputs): a running average per host of seconds per byte moved,
 * which later splits and grants add to each chunk's time. Not from the
 * first such task (the host makes its mirrors then); tasks moving less
 * than 1 MiB there teach nothing; a probe (host left out) may only lower
 * it. */
void pm__hosts_note_finish(const pm__task_t *t, int h, double seconds, unsigned chunks, double chunk_s,
                           bool probe);

/* Host 0: seconds before host h returns its first chunk of task t (its
 * bytes per chunk known): moving a chunk's own bytes there and back, the
 * bytes every chunk reads unless `fed` (h already has chunks of the task),
 * and h's overhead. *rate, its chunks per second, is capped by what the
 * link carries and lowered by the learned cost of each byte moved there. */
double pm__hosts_cost(const pm__task_t *t, int h, bool fed, double *rate);

/* A task's data per chunk as seen from another host (host 0, from the
 * subscriptions of its first and last chunks): bytes every chunk reads
 * (sent once per host), and per chunk the other bytes read and written. */
typedef struct pm__chunk_bytes {
    double common, in, out;
} pm__chunk_bytes_t;
void pm__chunk_bytes(const pm__task_t *t, pm__chunk_bytes_t *b);

/* Fills core's hooks that place tasks among the hosts (pm__hooks). */
void pm__hosts_hooks(void);

/* Host 0: chunks per second host h runs task t, by the performance model
 * (0: unknown or none). */
double pm__host_speed(pm__task_t *t, int h);

#endif /* PMLIB_SCHED_HOSTS_H */
