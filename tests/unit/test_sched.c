/*
 * Range hand-out and stealing: every chunk of a task goes to exactly one
 * stub, whatever the interleaving; initial shares are contiguous and follow
 * the weights; idle stubs steal under pull and never under static; the
 * one chunk of a task on one host goes to one stub, with no state; a task
 * seen drained stays on the ready lists while chunks were given back, and
 * one that left them goes back on when a batch is given back, which
 * happens only when the rest is worth another stub; a task kept for a
 * stub goes onto them when that stub leaves chunks, unless the task
 * ended meanwhile. Between
 * hosts, shares and grants follow speed and the cost of moving data, the
 * learned overhead of involving a host resists spikes, and a task's bytes
 * per chunk come from its subscriptions.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "exec/stubs.h"
#include "sched/hosts.h"
#include "sched/ranges.h"
#include "taskshell.h"

#define NSTUBS 4

static pm__stub_t stubs[NSTUBS];

static pm__task_t *make_task(uint64_t nchunks, pm_sched_t sched)
{
    return ts_task(nchunks, sched, NULL, stubs, NSTUBS);
}

START_TEST(pull_hands_out_each_chunk_once)
{
    const uint64_t n = 1000;
    pm__task_t *t = make_task(n, PM_SCHED_PULL);
    int *seen = calloc(n, sizeof *seen);
    uint64_t c;
    /* Initial shares: stub s starts at s * n / NSTUBS. */
    for (int s = 0; s < NSTUBS; s++) {
        ck_assert(t->policy->take(t, s, &c));
        ck_assert_uint_eq(c, (uint64_t)s * n / NSTUBS);
        seen[c]++;
    }
    /* Round-robin until every stub is refused. */
    for (int idle = 0; idle < NSTUBS;) {
        idle = 0;
        for (int s = 0; s < NSTUBS; s++) {
            if (t->policy->take(t, s, &c))
                seen[c]++;
            else
                idle++;
        }
    }
    for (uint64_t i = 0; i < n; i++)
        ck_assert_int_eq(seen[i], 1);
    free(seen);
    ts_free(t);
}
END_TEST

START_TEST(idle_stubs_steal_under_pull)
{
    const uint64_t n = 400;
    pm__task_t *t = make_task(n, PM_SCHED_PULL);
    int *seen = calloc(n, sizeof *seen);
    uint64_t c, taken = 0;
    /* Stub 0 sleeps; the others drain everything, including its share. */
    for (int busy = 1; busy;) {
        busy = 0;
        for (int s = 1; s < NSTUBS; s++)
            if (t->policy->take(t, s, &c)) {
                seen[c]++;
                taken++;
                busy = 1;
            }
    }
    ck_assert_uint_eq(taken, n);
    for (uint64_t i = 0; i < n; i++)
        ck_assert_int_eq(seen[i], 1);
    uint64_t steals = 0;
    for (int s = 0; s < NSTUBS; s++)
        steals += t->counts[s].steals;
    ck_assert_uint_gt(steals, 0);
    ck_assert(!t->policy->take(t, 0, &c));
    free(seen);
    ts_free(t);
}
END_TEST

START_TEST(static_never_steals)
{
    const uint64_t n = 100;
    pm__task_t *t = make_task(n, PM_SCHED_STATIC_EQUAL);
    uint64_t c, got = 0;
    while (t->policy->take(t, 1, &c)) {
        ck_assert(c >= 25 && c < 50);
        got++;
    }
    ck_assert_uint_eq(got, 25);
    /* Stub 0 still has its whole share. */
    ck_assert(t->policy->take(t, 0, &c));
    ck_assert_uint_eq(c, 0);
    ts_free(t);
}
END_TEST

START_TEST(weights_set_share_sizes)
{
    pm__task_t *t = calloc(1, sizeof *t);
    t->nchunks = 1000;
    t->hi = 1000;
    t->counts = calloc(NSTUBS, sizeof *t->counts);
    t->sched_space = pm__aligned_alloc(pm__ranges_space(NSTUBS));
    /* A reused block: slots of another task's gen, whatever their ranges,
     * unlocked (a task's block is reused once no thread holds it). */
    memset(t->sched_space, 0xab, pm__ranges_space(NSTUBS));
    for (int s = 0; s < NSTUBS; s++)
        atomic_store(&((pm__range_slot_t *)t->sched_space)[s].lock.held, 0);
    t->gen = 7;
    const double w[NSTUBS] = {1, 3, 0, 4};
    ck_assert_int_eq(pm__ranges_init(t, NSTUBS, w), 0);
    const uint64_t lo[NSTUBS] = {0, 125, 500, 500}, hi[NSTUBS] = {125, 500, 500, 1000};
    for (int s = 0; s < NSTUBS; s++) {
        const pm__range_slot_t *r = &t->sched->slot[s];
        if (lo[s] == hi[s]) { /* no share: left as it was, so empty by its gen */
            ck_assert_uint_ne(atomic_load(&r->gen), 7);
            continue;
        }
        ck_assert_uint_eq(atomic_load(&r->gen), 7);
        ck_assert_uint_eq(atomic_load(&r->lo), lo[s]);
        ck_assert_uint_eq(atomic_load(&r->hi), hi[s]);
    }
    /* The empty slot's owner finds nothing of its own, then steals. */
    uint64_t c;
    ck_assert(!pm__ranges_take_own(t, 2, &c));
    ck_assert(pm__ranges_steal(t, 2, &c)); /* the back half of stub 3's 500 */
    ck_assert_uint_eq(c, 750);
    ck_assert_uint_eq(atomic_load(&t->sched->slot[2].gen), 7);
    ck_assert_uint_eq(atomic_load(&t->sched->slot[2].lo), 751);
    ck_assert_uint_eq(atomic_load(&t->sched->slot[2].hi), 1000);
    ck_assert_uint_eq(atomic_load(&t->sched->slot[3].hi), 750);
    pm__ranges_fini(t);

    /* Planned again (host 0 after placing the task among the hosts): a
     * smaller share leaves stubs without one, and what the first plan gave
     * them must not stay (those chunks now run on other hosts). */
    t->lo = 0;
    t->hi = 2;
    const double w2[NSTUBS] = {1, 1, 1, 1};
    ck_assert_int_eq(pm__ranges_init(t, NSTUBS, w2), 0);
    uint64_t total = 0;
    for (int s = 0; s < NSTUBS; s++)
        while (pm__ranges_take_own(t, s, &c)) {
            ck_assert_uint_lt(c, 2);
            total++;
        }
    ck_assert_uint_eq(total, 2);
    pm__ranges_fini(t);
    free(t->sched_space);
    free(t->counts);
    free(t);
}
END_TEST

/* A task worth one stub's time starts as one pool: whichever stub comes
 * first takes it whole, so none steals piece by piece; a stub that comes
 * later still steals half. Ranges from other hosts that find every slot
 * busy wait as spares, more than the one kept in the state itself. */
START_TEST(pooled_share_goes_whole_to_first_stub)
{
    pm__task_t *t = make_task(16, PM_SCHED_PULL); /* planned in equal shares first */
    ck_assert_int_eq(pm__ranges_init_pooled(t, NSTUBS), 0);
    ck_assert_uint_eq(pm__ranges_left(t), 16);
    uint64_t c, seen = 0;
    ck_assert(pm__ranges_take_own(t, 2, &c)); /* any stub: 2 comes first */
    ck_assert_uint_eq(c, 0);
    ck_assert_uint_eq(pm__ranges_extend(t, 2, 1, 7), 7); /* a batch of 8 */
    ck_assert(!pm__ranges_take_own(t, 0, &c));         /* nothing of its own */
    ck_assert(pm__ranges_steal(t, 0, &c));             /* the back half of 8..15 */
    ck_assert_uint_eq(c, 12);
    seen += 8 + 1;
    while (pm__ranges_take_own(t, 0, &c) || pm__ranges_take_own(t, 2, &c))
        seen++;
    ck_assert_uint_eq(seen, 16);
    ck_assert_uint_eq(pm__ranges_left(t), 0);
    ck_assert_uint_eq(t->counts[2].steals, 0);

    /* A first plan writes no slot: a reused block's slots, of an older
     * task's gen, read as empty. */
    pm__ranges_fini(t);
    t->gen++;
    t->sched_slots = false; /* a new task in the block */
    ck_assert_int_eq(pm__ranges_init_pooled(t, NSTUBS), 0);
    ck_assert(pm__ranges_take_own(t, 1, &c));
    ck_assert_uint_eq(c, 0);
    ck_assert_uint_eq(pm__ranges_extend(t, 1, 1, 100), 15);
    ck_assert(!pm__ranges_take_own(t, 3, &c));
    ck_assert(!pm__ranges_steal(t, 3, &c));

    /* Every slot busy: ranges from other hosts queue as spares, and the
     * stubs that run out take them, each chunk once. */
    t->lo = 0;
    t->hi = 4;
    ck_assert_int_eq(pm__ranges_init_pooled(t, NSTUBS), 0);
    for (int s = 0; s < NSTUBS; s++)
        pm__ranges_install(t, 100 + 10 * (uint64_t)s, 101 + 10 * (uint64_t)s);
    pm__ranges_install(t, 200, 203);
    pm__ranges_install(t, 300, 302);
    int got[400] = {0};
    uint64_t total = 0;
    for (int more = 1; more;) {
        more = 0;
        for (int s = 0; s < NSTUBS; s++)
            if (pm__ranges_take_own(t, s, &c)) {
                ck_assert_uint_lt(c, 400);
                got[c]++;
                total++;
                more = 1;
            }
    }
    ck_assert_uint_eq(total, 4 + NSTUBS + 3 + 2);
    for (int i = 0; i < 400; i++)
        ck_assert_int_le(got[i], 1);
    ts_free(t);
}
END_TEST

/* Stub 0 takes chunks 0 to 3 of a task of 16 as one batch, and the
 * other stubs take every other chunk: the batch holds the last ones. */
static void last_chunks_in_a_batch(pm__task_t *t)
{
    uint64_t c;
    ck_assert(pm__ranges_take_own(t, 0, &c));
    ck_assert_uint_eq(c, 0);
    ck_assert_uint_eq(pm__ranges_extend(t, 0, 1, 3), 3);
    for (int s = 1; s < NSTUBS; s++)
        while (t->policy->take(t, s, &c))
            ;
}

/* A stub that took a task's last chunk outside the ready lock (a poked
 * stub) takes the task off the ready lists only if nothing is left there
 * under the lock: a stub whose batch ran long may have given the rest
 * back in between (while the task was listed), and unlisted with chunks
 * left, no stub would find the task again (all 15 stubs of a 16-core host
 * parked beside one). Fails where the stub unlisted on its own reading. */
START_TEST(drained_task_stays_listed_with_chunks_given_back)
{
    pm__task_t *t = make_task(16, PM_SCHED_PULL); /* shares of 4 chunks */
    __atomic_store_n(&t->listed, 1, __ATOMIC_RELAXED); /* as on the ready list */
    uint64_t c;
    last_chunks_in_a_batch(t);
    ck_assert_uint_eq(t->policy->left(t), 0); /* what stub 3 saw */
    ck_assert(pm__ranges_untake(t, 0, 1, 4)); /* stub 0's first chunk ran long */
    pm__task_unready_drained(t);              /* stub 3, late */
    ck_assert_int_eq(__atomic_load_n(&t->listed, __ATOMIC_RELAXED), 1);
    int ran = 0;
    while (pm__ranges_take_own(t, 0, &c))
        ran++;
    ck_assert_int_eq(ran, 3);
    pm__task_unready_drained(t);
    ck_assert_int_eq(__atomic_load_n(&t->listed, __ATOMIC_RELAXED), 0);
    ts_free(t);
}
END_TEST

/* A batch may take a task's last chunks, and the task then leaves the
 * ready lists. When its first chunk runs long, the rest of the batch goes
 * back and the task back onto the lists, at their front, where the other
 * stubs find it: 16 chunks of 10 ms once ran on one stub while three
 * slept. Fails where chunks went back only to a task still listed. */
START_TEST(batch_given_back_relists_task)
{
    pm__task_t *t = make_task(16, PM_SCHED_PULL); /* shares of 4 chunks */
    t->run_kinds = 1u;                            /* CPU stubs run it */
    uint64_t c;
    last_chunks_in_a_batch(t);
    ck_assert_uint_eq(t->policy->left(t), 0); /* the batch holds the last chunks */
    ck_assert_int_eq(__atomic_load_n(&t->listed, __ATOMIC_RELAXED), 0); /* off the lists */
    ck_assert(pm__stub_give_back(t, 0, 1, 4));
    ck_assert_int_eq(__atomic_load_n(&t->listed, __ATOMIC_RELAXED), 1);
    ck_assert_ptr_eq(pm__rt.ready[0].head, t);
    ck_assert_ptr_null(pm__rt.ready[1].head);
    int ran = 0;
    while (t->policy->take(t, 2, &c)) /* another stub, stealing */
        ran++;
    ck_assert_int_eq(ran, 3);
    pm__task_unready_drained(t);
    ck_assert_ptr_null(pm__rt.ready[0].head);
    ts_free(t);
}
END_TEST

static double model_knows_nothing(const struct pm__model *m, int kind, const char *name)
{
    (void)m;
    (void)kind;
    (void)name;
    return 0;
}

/* A task kept for the stub that made it ready goes onto the lists when
 * that stub stops with chunks left (pm__task_unkeep); but a stub it
 * poked for them may have run them all and ended the task meanwhile,
 * and the program may then free the block: the task must stay off the
 * lists, or the stubs later walk a reused block (16 cores: every stub
 * asleep with a task of the next chain on the list unreached). One still
 * running goes on. Fails where the keeper lists it whatever happened. */
START_TEST(kept_task_ended_meanwhile_stays_unlisted)
{
    double (*model_ns)(const struct pm__model *, int, const char *) = pm__hooks.model_ns;
    pm__hooks.model_ns = model_knows_nothing;
    pm__task_t *t = make_task(16, PM_SCHED_PULL);
    t->run_kinds = 1u;
    atomic_store(&t->outstanding, 16);
    uint64_t c;
    while (t->policy->take(t, 2, &c)) /* the poked stub takes them all... */
        ;
    atomic_store(&t->outstanding, 0); /* ...runs them, and the task ends */
    pm__task_unkeep(t);
    ck_assert_int_eq(__atomic_load_n(&t->listed, __ATOMIC_RELAXED), 0);
    ck_assert_ptr_null(pm__rt.ready[0].head);
    ts_free(t);

    t = make_task(16, PM_SCHED_PULL); /* chunks left, none run yet */
    t->run_kinds = 1u;
    atomic_store(&t->outstanding, 16);
    pm__task_unkeep(t);
    ck_assert_int_eq(__atomic_load_n(&t->listed, __ATOMIC_RELAXED), 1);
    ck_assert_ptr_eq(pm__rt.ready[0].head, t);
    pm__task_unready(t);
    ck_assert_ptr_null(pm__rt.ready[0].head);
    ts_free(t);
    pm__hooks.model_ns = model_ns;
}
END_TEST

/* A stub joins the pollers as stub_main does: its poke word WAIT with
 * its count of joins, then its bit. */
static void join(pm__stub_t *s)
{
    atomic_store(&s->poke, ++s->joins << 8 | PM__POKE_WAIT);
    atomic_fetch_or(&pm__rt.pollers[0][0], 1ull << s->index);
}

/* A program thread's stash of polling stubs: it hands tasks to them
 * highest first without the pollers' word; a stashed stub whose spell
 * ends takes itself back, and the stash then cannot claim it, not even
 * after it joined the pollers again (a claim by the stash's old word
 * would hand it a task while another thread may pop and poke it too); a
 * stub that another thread popped off the word is owed that poke and
 * never takes itself back; a poked stub's mark is cleared. */
START_TEST(stash_claims_only_stubs_still_waiting)
{
    static atomic_uint_fast64_t words[2];
    pm__stub_t *saved = pm__rt.stubs;
    const int nstubs = pm__rt.nstubs, nwords = pm__rt.poll_words;
    atomic_uint_fast64_t *pollers = pm__rt.pollers[0], *stashed = pm__rt.stashed;
    for (int i = 0; i < NSTUBS; i++)
        stubs[i] = (pm__stub_t){.index = i, .ops = &pm__cpu_ops};
    pm__rt.stubs = stubs;
    pm__rt.nstubs = NSTUBS;
    pm__rt.pollers[0] = &words[0];
    pm__rt.stashed = &words[1];
    pm__rt.poll_words = 1;
    atomic_store(&words[0], 0);
    atomic_store(&words[1], 0);
    for (int i = 0; i < 3; i++)
        join(&stubs[i]);

    uint64_t w2, w1, w0, w;
    pm__stub_t *s = pm__stash_next(true, &w2); /* takes all three */
    ck_assert_ptr_eq(s, &stubs[2]);
    ck_assert_uint_eq(atomic_load(&words[0]), 0);
    ck_assert_uint_eq(atomic_load(&words[1]), 7);
    ck_assert(pm__stash_poke(s, w2, (pm__task_t *)&w));
    ck_assert_uint_eq(pm__poke_state(atomic_load(&stubs[2].poke)), PM__POKE_DONE);
    ck_assert_ptr_eq(pm__poke_taken(&stubs[2]), (pm__task_t *)&w);
    ck_assert_uint_eq(atomic_load(&words[1]), 3); /* its mark cleared */

    ck_assert_ptr_eq(pm__stash_next(false, &w1), &stubs[1]);
    ck_assert(pm__poke_take_back(&stubs[1])); /* its spell ended first */
    ck_assert_uint_eq(atomic_load(&words[1]), 1);
    join(&stubs[1]); /* and it polls again */
    ck_assert(!pm__stash_poke(&stubs[1], w1, NULL));
    ck_assert_uint_eq(pm__poke_state(atomic_load(&stubs[1].poke)), PM__POKE_WAIT);
    ck_assert_ptr_eq(pm__pollers_pop(0), &stubs[1]); /* popped: owed its poke */
    ck_assert(!pm__poke_take_back(&stubs[1]));

    ck_assert_ptr_eq(pm__stash_next(false, &w0), &stubs[0]);
    ck_assert(pm__poke_take_back(&stubs[0]));
    ck_assert(!pm__stash_poke(&stubs[0], w0, NULL)); /* gone before its claim */
    ck_assert(!pm__poke_take_back(&stubs[0]));       /* once */
    ck_assert_ptr_null(pm__stash_next(false, &w));
    ck_assert_uint_eq(atomic_load(&words[1]), 0);

    pm__rt.stubs = saved;
    pm__rt.nstubs = nstubs;
    pm__rt.pollers[0] = pollers;
    pm__rt.stashed = stashed;
    pm__rt.poll_words = nwords;
}
END_TEST

/* A batch whose first chunk ran long gives the rest back only when the
 * rest, at that chunk's time, is worth engaging another stub: a batch of
 * one-subtask chunks after a slow first chunk stays with its stub (on 16
 * cores, one task in 15 of a chain of 16-chunk tasks gave back and drew
 * other stubs in); 16 chunks of 10 ms do go back. A stub is engaged for
 * 2 us of work on 2 cores, 2 x sqrt(8) = 5.66 us on 16, and the caller
 * counts as the first. */
START_TEST(short_rest_of_batch_stays)
{
    const int ncpu = pm__rt.ncpu;
    pm__rt.ncpu = 16;
    ck_assert(!pm__task_worth_more(15, 300));     /* 4.5 us of work left */
    ck_assert(!pm__task_worth_more(2, 4000));     /* 8 us: under two stubs' worth */
    ck_assert(pm__task_worth_more(3, 4000));      /* 12 us: a second stub */
    ck_assert(pm__task_worth_more(15, 10000000)); /* 10 ms chunks */
    ck_assert(pm__task_worth_more(1, 6000));      /* a chunk alone is worth a stub */
    pm__rt.ncpu = 2;
    ck_assert(!pm__task_worth_more(15, 200)); /* 3 us */
    ck_assert(pm__task_worth_more(15, 300));  /* 4.5 us */
    pm__rt.ncpu = ncpu;
}
END_TEST

struct racer {
    pm__task_t *t;
    int stub;
    atomic_int *seen;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    uint64_t c;
    while (r->t->policy->take(r->t, r->stub, &c))
        atomic_fetch_add(&r->seen[c], 1);
    return NULL;
}

START_TEST(concurrent_take_and_steal)
{
    const uint64_t n = 20000;
    pm__task_t *t = make_task(n, PM_SCHED_PULL);
    atomic_int *seen = calloc(n, sizeof *seen);
    pthread_t th[NSTUBS];
    struct racer r[NSTUBS];
    for (int s = 0; s < NSTUBS; s++) {
        r[s] = (struct racer){t, s, seen};
        pthread_create(&th[s], NULL, race, &r[s]);
    }
    for (int s = 0; s < NSTUBS; s++)
        pthread_join(th[s], NULL);
    for (uint64_t i = 0; i < n; i++)
        ck_assert_int_eq(atomic_load(&seen[i]), 1);
    free(seen);
    ts_free(t);
}
END_TEST

/* A task of one chunk for the CPU stubs of one host has no scheduling
 * state: its chunk is a flag that exactly one of the stubs racing for it
 * takes; the others are refused, and nothing is left. */
START_TEST(one_chunk_goes_to_one_stub)
{
    int hosts = pm__rt.nhosts;
    pm__rt.nhosts = 1;
    for (int round = 0; round < 200; round++) {
        pm__task_t *t = make_task(1, PM_SCHED_PULL);
        ck_assert_ptr_null(t->sched);
        ck_assert_uint_eq(t->policy->left(t), 1);
        atomic_int seen = 0;
        pthread_t th[NSTUBS];
        struct racer r[NSTUBS];
        for (int s = 0; s < NSTUBS; s++) {
            r[s] = (struct racer){t, s, &seen};
            pthread_create(&th[s], NULL, race, &r[s]);
        }
        for (int s = 0; s < NSTUBS; s++)
            pthread_join(th[s], NULL);
        ck_assert_int_eq(atomic_load(&seen), 1);
        ck_assert_uint_eq(t->policy->left(t), 0);
        uint64_t c;
        ck_assert(!t->policy->take(t, 0, &c));
        ts_free(t);
    }
    pm__rt.nhosts = hosts;
}
END_TEST

/* Equal hosts, free data: equal shares; every chunk placed once. */
START_TEST(split_equal_hosts_free_data)
{
    const double lat[3] = {0, 0, 0}, rate[3] = {10, 10, 10};
    uint64_t c[3];
    pm__split_by_cost(3, lat, rate, 300, c);
    ck_assert_uint_eq(c[0] + c[1] + c[2], 300);
    for (int h = 0; h < 3; h++)
        ck_assert(c[h] >= 99 && c[h] <= 101);
}
END_TEST

/* A host twice as fast takes twice the chunks; one whose data would take
 * longer than host 0 needs for everything takes none. */
START_TEST(split_follows_speed_and_cost)
{
    const double lat[3] = {0, 0, 100}, rate[3] = {10, 20, 1000};
    uint64_t c[3];
    pm__split_by_cost(3, lat, rate, 300, c);
    ck_assert_uint_eq(c[2], 0);
    ck_assert_uint_eq(c[0] + c[1], 300);
    ck_assert(c[1] >= 199 && c[1] <= 200);
    /* Finishing times balance: host 1 waits lat 1 s, then runs as fast. */
    const double lat2[2] = {0, 1}, rate2[2] = {10, 10};
    pm__split_by_cost(2, lat2, rate2, 100, c);
    ck_assert_uint_eq(c[0] + c[1], 100);
    ck_assert(c[1] >= 44 && c[1] <= 45);          /* (T - 1) * 10 = 100 - T * 10: T = 5.5 */
    /* Two chunks, two equal hosts, next to no data: one each (rounding
     * down would leave both on host 0). */
    const double near[2] = {0, 1e-9}, same[2] = {1000, 1000};
    pm__split_by_cost(2, near, same, 2, c);
    ck_assert_uint_eq(c[0], 1);
    ck_assert_uint_eq(c[1], 1);
    /* One chunk: host 0, which needs no data. */
    pm__split_by_cost(2, near, same, 1, c);
    ck_assert_uint_eq(c[0], 1);
    ck_assert_uint_eq(c[1], 0);
    /* No host may run it at all: host 0 keeps the chunks (its policy decides). */
    const double zero[2] = {0, 0};
    pm__split_by_cost(2, lat2, zero, 7, c);
    ck_assert_uint_eq(c[0], 7);
    ck_assert_uint_eq(c[1], 0);
}
END_TEST

START_TEST(grant_only_what_pays)
{
    /* Equal speeds, no latency: half. */
    ck_assert_uint_eq(pm__grant_by_cost(10, 10, 0, 100), 50);
    /* Data further away than the whole rest takes here: nothing. */
    ck_assert_uint_eq(pm__grant_by_cost(10, 10, 11, 100), 0);
    /* lat 1 s: (10 - 1) / (0.1 + 0.1) = 45. */
    ck_assert_uint_eq(pm__grant_by_cost(10, 10, 1, 100), 45);
    /* A much faster host may take nearly all; never more than is left. */
    ck_assert_uint_le(pm__grant_by_cost(1, 1e9, 0, 100), 100);
    ck_assert_uint_ge(pm__grant_by_cost(1, 1e9, 0, 100), 99);
    ck_assert_uint_eq(pm__grant_by_cost(10, 0, 0, 100), 0);
    ck_assert_uint_eq(pm__grant_by_cost(10, 10, 0, 0), 0);
    ck_assert_uint_eq(pm__grant_by_cost(10, 10, NAN, 100), 0);
}
END_TEST

/* The overhead of involving a host: the first sample is left out (threads
 * waking, mirrors made), a spike counts as at most twice the average, and
 * a host measured after tasks without it may only lower it. */
START_TEST(overhead_resists_spikes)
{
    pm__hosts_overhead_init(2);
    pm__hosts_seed_overhead(1, 20e-6);
    pm__hosts_note_overhead(1, 5e-3, false);
    ck_assert(fabs(pm__hosts_overhead(1) - 20e-6) < 1e-15);
    pm__hosts_note_overhead(1, 86e-6, false); /* counted as 40 us */
    ck_assert(fabs(pm__hosts_overhead(1) - 22.5e-6) < 1e-15);
    pm__hosts_note_overhead(1, 14.5e-6, false);
    ck_assert(fabs(pm__hosts_overhead(1) - 21.5e-6) < 1e-15);
    pm__hosts_note_overhead(1, 300e-6, true); /* after tasks without it: not higher */
    ck_assert(fabs(pm__hosts_overhead(1) - 21.5e-6) < 1e-15);
    pm__hosts_note_overhead(1, 12e-6, true);
    ck_assert(fabs(pm__hosts_overhead(1) - 12e-6) < 1e-15);
    for (int i = 0; i < 40; i++) /* a host that became dear is followed */
        pm__hosts_note_overhead(1, 1e-3, false);
    ck_assert(pm__hosts_overhead(1) > 500e-6);
    pm__hosts_overhead_free();
}
END_TEST

/* What a host's chunks took beyond the link and its devices is learned as a
 * cost per byte moved there, which slows its chunks in later splits; a
 * probe may only lower it, and tasks moving little teach nothing, nor the
 * first task of each callback set a host runs. */
START_TEST(learn_cost_of_moving)
{
    pm__hosts_overhead_init(2); /* bandwidth unmeasured: PM__HOST_BW_GUESS */
    static const pm__callbacks_t set = {.name_hash = 0};
    pm__task_t t = {.xfer_in = 4e6, .xfer_out = 4e6, .cbs = &set};
    double rate = 100; /* 10 ms a chunk; its 8 MB take 8 ms on the wire */
    ck_assert(fabs(pm__hosts_cost(&t, 1, true, &rate) - 8e-3) < 1e-12);
    ck_assert(fabs(rate - 100) < 1e-9);
    /* The first task a host runs makes its mirrors: no sample. */
    pm__hosts_note_finish(&t, 1, 10, 4, 0.01, false);
    rate = 100;
    pm__hosts_cost(&t, 1, true, &rate);
    ck_assert(fabs(rate - 100) < 1e-9);
    /* 4 chunks in 88 ms where 48 were expected: 40 ms over 32 MB. */
    pm__hosts_note_finish(&t, 1, 0.088, 4, 0.01, false);
    rate = 100;
    double lat = pm__hosts_cost(&t, 1, true, &rate);
    ck_assert(fabs(rate - 50) < 1e-6);                      /* 10 ms + 8e6 x 1.25 ns */
    ck_assert(fabs(lat - (8e-3 + 8e6 * 1.25e-9)) < 1e-12); /* the chunk there and back */
    ck_assert(fabs(pm__hosts_moving(1, 1e6) - (1e-3 + 1.25e-3)) < 1e-12);
    /* A task that moved less than 1 MiB says nothing about bytes. */
    pm__task_t small = {.xfer_in = 1000, .xfer_out = 1000};
    pm__hosts_note_finish(&small, 1, 10, 4, 0.01, false);
    ck_assert(fabs(pm__hosts_moving(1, 1e6) - 2.25e-3) < 1e-12);
    /* A probe that took longer changes nothing; one on time clears it. */
    pm__hosts_note_finish(&t, 1, 1.0, 4, 0.01, true);
    ck_assert(fabs(pm__hosts_moving(1, 1e6) - 2.25e-3) < 1e-12);
    pm__hosts_note_finish(&t, 1, 0.048, 4, 0.01, true);
    ck_assert(fabs(pm__hosts_moving(1, 1e6) - 1e-3) < 1e-12);
    /* Later samples are averaged in, a quarter each. */
    pm__hosts_note_finish(&t, 1, 0.088, 4, 0.01, false);
    ck_assert(fabs(pm__hosts_moving(1, 1e6) - (1e-3 + 1.25e-3 / 4)) < 1e-12);
    /* The first task of another callback set there (mirrors of its own
     * ranges, its plans) is no sample either; its next one is. */
    static const pm__callbacks_t other_set = {.name_hash = 7};
    pm__task_t other = {.xfer_in = 4e6, .xfer_out = 4e6, .cbs = &other_set};
    pm__hosts_note_finish(&other, 1, 10, 4, 0.01, false);
    ck_assert(fabs(pm__hosts_moving(1, 1e6) - (1e-3 + 1.25e-3 / 4)) < 1e-12);
    pm__hosts_note_finish(&other, 1, 0.088, 4, 0.01, false);
    ck_assert(fabs(pm__hosts_moving(1, 1e6) - (1e-3 + 0.3125e-3 + (1.25e-3 - 0.3125e-3) / 4)) < 1e-12);
    /* Host 0 moves nothing to itself. */
    pm__hosts_note_finish(&t, 0, 0.088, 4, 0.01, false);
    rate = 100;
    pm__hosts_cost(&t, 0, true, &rate);
    ck_assert(fabs(rate - 100) < 1e-9);
    pm__hosts_overhead_free();
}
END_TEST

/* A capped give takes at most that many from the back of the largest range. */
START_TEST(give_at_most)
{
    pm__task_t *t = make_task(100, PM_SCHED_PULL); /* 25 chunks per stub */
    uint64_t lo, hi;
    ck_assert(pm__ranges_give(t, 3, false, &lo, &hi));
    ck_assert_uint_eq(hi - lo, 3);
    ck_assert(pm__ranges_give(t, UINT64_MAX, false, &lo, &hi));
    ck_assert_uint_eq(hi - lo, 12);
    ck_assert(pm__ranges_give(t, 1000, false, &lo, &hi));
    ck_assert_uint_eq(hi - lo, 25);
    ts_free(t);
}
END_TEST

/* Half of a range of one chunk is none: it stays unless the caller found
 * every stub here busy, and then it goes whole. */
START_TEST(give_lone_chunk)
{
    pm__task_t *t = make_task(NSTUBS, PM_SCHED_PULL); /* one chunk per stub */
    uint64_t lo = 0, hi = 0;
    ck_assert(!pm__ranges_give(t, UINT64_MAX, false, &lo, &hi));
    ck_assert_uint_eq(pm__ranges_left(t), NSTUBS);
    ck_assert(pm__ranges_give(t, UINT64_MAX, true, &lo, &hi));
    ck_assert_uint_eq(hi - lo, 1);
    ck_assert_uint_eq(pm__ranges_left(t), NSTUBS - 1);
    ts_free(t);
}
END_TEST

static void add_sub(pm__chunk_subs_t *cs, int k, int mem, int access, uint64_t off, uint64_t block,
                    uint64_t stride, uint64_t count)
{
    cs->recs = realloc(cs->recs, (cs->n + 1) * sizeof *cs->recs);
    cs->recs[cs->n++] = (pm__sub_t){off, block, stride, count, (uint8_t)mem, (uint8_t)access};
    cs->start[k + 1] = cs->n;
}

/* matmul's shape: every chunk reads all of B (memory 1) and its own rows of
 * A (memory 0), and writes its rows of C (memory 2); columns of a
 * row-major array (strided) share nothing. */
START_TEST(chunk_bytes_from_subscriptions)
{
    const uint64_t n = 4;
    pm_task_memory_t mem[3] = {0};
    pm__memory_t *mems[3] = {0};
    pm__task_t t = {.nchunks = n, .grain = 1, .mems = mems};
    t.desc.subtasks = n;
    t.desc.nmem = 3;
    t.desc.mem = mem;
    pm__chunk_subs_t cs[4] = {0};
    for (uint64_t c = 0; c < n; c++) {
        cs[c].start = calloc(2, sizeof *cs[c].start);
        add_sub(&cs[c], 0, 0, PM_READ, c * 1000, 1000, 1000, 1);
        add_sub(&cs[c], 0, 1, PM_READ, 0, 8000, 8000, 1);
        add_sub(&cs[c], 0, 2, PM_WRITE, c * 500, 500, 500, 1);
    }
    t.chunk_subs = cs;
    pm__chunk_bytes_t b;
    pm__chunk_bytes(&t, &b);
    ck_assert(fabs(b.common - 8000) < 1e-9);
    ck_assert(fabs(b.in - 1000) < 1e-9);
    ck_assert(fabs(b.out - 500) < 1e-9);
    for (uint64_t c = 0; c < n; c++) {
        free(cs[c].recs);
        cs[c].recs = NULL;
        cs[c].n = 0;
        /* column c of a 4 x 4 array of 8-byte elements, read and written */
        add_sub(&cs[c], 0, 0, PM_READ_WRITE, c * 8, 8, 32, 4);
    }
    pm__chunk_bytes(&t, &b);
    ck_assert(fabs(b.common) < 1e-9);
    ck_assert(fabs(b.in - 32) < 1e-9);
    ck_assert(fabs(b.out - 32) < 1e-9);
    for (uint64_t c = 0; c < n; c++) {
        free(cs[c].recs);
        cs[c].recs = NULL;
        cs[c].n = 0;
        /* rows of 8 bytes 32 apart; the last chunk's 4 bytes further on:
         * 4 of each row's bytes are read by both ends */
        add_sub(&cs[c], 0, 0, PM_READ, c == n - 1 ? 4 : 0, 8, 32, 4);
    }
    pm__chunk_bytes(&t, &b);
    ck_assert(fabs(b.common - 16) < 1e-9);
    ck_assert(fabs(b.in - 16) < 1e-9);
    ck_assert(fabs(b.out) < 1e-9);
    for (uint64_t c = 0; c < n; c++) {
        free(cs[c].recs);
        free(cs[c].start);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sched");
    TCase *tc = tcase_create("ranges");
    tcase_add_test(tc, pull_hands_out_each_chunk_once);
    tcase_add_test(tc, idle_stubs_steal_under_pull);
    tcase_add_test(tc, static_never_steals);
    tcase_add_test(tc, weights_set_share_sizes);
    tcase_add_test(tc, concurrent_take_and_steal);
    tcase_add_test(tc, one_chunk_goes_to_one_stub);
    tcase_add_test(tc, pooled_share_goes_whole_to_first_stub);
    tcase_add_test(tc, drained_task_stays_listed_with_chunks_given_back);
    tcase_add_test(tc, batch_given_back_relists_task);
    tcase_add_test(tc, kept_task_ended_meanwhile_stays_unlisted);
    tcase_add_test(tc, stash_claims_only_stubs_still_waiting);
    tcase_add_test(tc, short_rest_of_batch_stays);
    suite_add_tcase(s, tc);
    TCase *th = tcase_create("hosts");
    tcase_add_test(th, split_equal_hosts_free_data);
    tcase_add_test(th, split_follows_speed_and_cost);
    tcase_add_test(th, grant_only_what_pays);
    tcase_add_test(th, give_at_most);
    tcase_add_test(th, give_lone_chunk);
    tcase_add_test(th, learn_cost_of_moving);
    tcase_add_test(th, overhead_resists_spikes);
    tcase_add_test(th, chunk_bytes_from_subscriptions);
    suite_add_tcase(s, th);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
