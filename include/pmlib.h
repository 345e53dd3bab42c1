/*
 * pmlib: a runtime for the partitioned-memory bulk-synchronous model.
 *
 * A program creates memories and submits a *task*: a subtask count, the
 * memories with access modes and the name of a set of callbacks registered on
 * every host. Each subtask subscribes to the byte ranges it reads and writes,
 * runs on a CPU core or a GPU, and its outputs are written back or merged by a
 * reduce. This header is the whole public interface.
 *
 * Conventions: every call returns an int, 0 on success (pm_task_desc_add:
 * the new memory index, >= 0) and a negative PM_E* code otherwise; the failing call also logs one line saying what was wrong
 * and how to fix it. Handles are small values that stay safe to pass after
 * release (the call then returns PM_EBADHANDLE).
 */
#ifndef PMLIB_H
#define PMLIB_H

#include <stddef.h>
#include <stdint.h>

#include "pmlib_config.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(PMLIB_BUILDING) && defined(__GNUC__)
#define PM_EXPORT __attribute__((visibility("default")))
#else
#define PM_EXPORT
#endif

/* ------------------------------------------------------------------------ */
/* Versions                                                                  */
/* ------------------------------------------------------------------------ */

/** Encodes a version as one comparable integer. */
#define PMLIB_VERSION_ENCODE(major, minor, patch) \
    (((major) * 10000) + ((minor) * 100) + (patch))
/** The version of the headers a program was compiled against. */
#define PMLIB_VERSION \
    PMLIB_VERSION_ENCODE(PMLIB_VERSION_MAJOR, PMLIB_VERSION_MINOR, \
                         PMLIB_VERSION_PATCH)

/** The version string of the library the program runs with, e.g. "0.1.0". */
PM_EXPORT const char *pm_version(void);

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/*
 * The one list of error codes: X(NAME, value, message). The enum, the
 * message table and the name table are all generated from it.
 */
#define PM_ERROR_LIST(X)                                                      \
    X(EINVAL, -1, "invalid argument")                                         \
    X(ENOMEM, -2, "out of memory")                                            \
    X(ENOTINIT, -3, "pmlib is not initialized (call pm_init first)")          \
    X(EINIT, -4, "pmlib is already initialized")                              \
    X(EBADHANDLE, -5, "invalid or released handle")                           \
    X(ENOCALLBACK, -6, "no callbacks registered under that name")             \
    X(EEXIST, -7, "a callback set with that name is already registered")     \
    X(ERANGE, -8, "subscription outside the memory's bounds")                \
    X(EOVERLAP, -9, "write subscriptions overlap and the memory has no reduce") \
    X(EACCESS, -10, "access not allowed by the task's memory mode")           \
    X(ECALLBACK, -11, "a callback returned an error")                         \
    X(EBUSY, -12, "object is in use by an unfinished task")                   \
    X(ENOTSUP, -13, "not supported by this build of pmlib")                   \
    X(ENODEVICE, -14, "no device can run this task")                          \
    X(ETYPE, -15, "reduce op not defined for that element type")             \
    X(ETOOMANY, -16, "too many memories in one task")                         \
    X(EMPI, -17, "MPI error")                                                 \
    X(ECUDA, -18, "CUDA error")                                               \
    X(EHOST, -19, "a host failed or left")                                    \
    X(ETIMEDOUT, -20, "timed out")                                            \
    X(EINTERNAL, -21, "internal error in pmlib (please report it)")          \
    X(EDEADLK, -22, "the call would wait for itself (made from a callback)")  \
    X(ESTRAY, -23, "a subtask wrote bytes outside its subscriptions")

/** Error codes; 0 (PM_OK) is success. */
typedef enum pm_error {
    PM_OK = 0,
#define PM__ERROR_ENUM(name, value, msg) PM_##name = (value),
    PM_ERROR_LIST(PM__ERROR_ENUM)
#undef PM__ERROR_ENUM
} pm_error_t;

/** A one-line message for an error code ("success" for 0). */
PM_EXPORT const char *pm_strerror(int err);
/** The symbolic name of an error code, e.g. "PM_ERANGE". */
PM_EXPORT const char *pm_errname(int err);

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Threads: between pm_init and pm_finalize every call may be made from
 * several threads at once. pm_init and pm_finalize are called from one
 * thread while no other is inside pmlib (a concurrent pm_init returns
 * PM_EINIT, pm_finalize beside another call PM_EBUSY). From a callback the
 * blocking calls (pm_task_wait, pm_task_wait_all, pm_finalize) return
 * PM_EDEADLK.
 */

/**
 * Starts pmlib: reads the PMLIB_* environment, starts one stub per CPU core
 * (PMLIB_NCPU overrides) and joins the MPI job when started by mpirun.
 * argc/argv may be NULL.
 */
PM_EXPORT int pm_init(int *argc, char ***argv);
/** Waits for every task, stops the stubs and frees what pmlib holds. */
PM_EXPORT int pm_finalize(void);
/** This host's id (MPI rank), 0 on a single host; -1 before pm_init. */
PM_EXPORT int pm_host_id(void);
/** The number of hosts in the job; 0 before pm_init. */
PM_EXPORT int pm_host_count(void);

/** Kinds of devices a subtask can run on; also used as a bit mask. */
typedef enum pm_device_kind {
    PM_DEVICE_CPU = 1, /**< one CPU core */
    PM_DEVICE_GPU = 2, /**< one CUDA GPU */
    PM_DEVICE_ANY = 3
} pm_device_kind_t;

/** Counts this host's stubs of the given kinds (a mask of pm_device_kind). */
PM_EXPORT int pm_device_count(int kinds, int *count);

/** Set when this header declares pm_device_info(). */
#define PM_HAVE_DEVICE_TABLE 1

/** One device (a CPU core or a GPU) of one host, as that host reported it. */
typedef struct pm_device_info {
    pm_device_kind_t kind; /**< PM_DEVICE_CPU or PM_DEVICE_GPU */
    char name[96];         /**< GPU name; "cpu core" for cores */
    int major, minor;      /**< GPU compute capability; 0 for CPUs */
    size_t mem_bytes;      /**< GPU memory; 0 for CPUs */
    int host;              /**< host that has it */
} pm_device_info_t;

/**
 * Describes device `index` of host `host`: its stubs in order, CPU cores
 * first, then GPUs. Returns PM_ERANGE once index passes the last one (quietly:
 * that is how to count them), PM_EINVAL for a bad host.
 */
PM_EXPORT int pm_device_info(int host, int index, pm_device_info_t *out);

/* ------------------------------------------------------------------------ */
/* Memories                                                                  */
/* ------------------------------------------------------------------------ */

/** A memory handle. Copyable; PM_MEMORY_NULL is never a valid memory. */
typedef struct pm_memory {
    uint64_t id;
} pm_memory_t;
#define PM_MEMORY_NULL ((pm_memory_t){0})

/**
 * Creates a memory of `bytes` bytes, zero-filled, version 1. Its host copy
 * lives on the submitting host and is reached with pm_memory_data().
 */
PM_EXPORT int pm_memory_create(size_t bytes, pm_memory_t *memory);
/** The host pointer of a memory (64-byte aligned), NULL for a bad handle. */
PM_EXPORT void *pm_memory_data(pm_memory_t memory);
/** The size of a memory in bytes. */
PM_EXPORT int pm_memory_size(pm_memory_t memory, size_t *bytes);
/**
 * The memory's version. A task that writes the memory bumps it when it
 * completes, and so does pm_memory_touch; cached copies (on other hosts and
 * GPUs) stay valid while it is unchanged.
 */
PM_EXPORT int pm_memory_version(pm_memory_t memory, uint64_t *version);
/**
 * Says that the program wrote into the memory through pm_memory_data()
 * between tasks, so cached copies must be refreshed. Fails with PM_EBUSY
 * while an unfinished task uses the memory.
 */
PM_EXPORT int pm_memory_touch(pm_memory_t memory);
/** Frees a memory; PM_EBUSY while an unfinished task uses it. */
PM_EXPORT int pm_memory_release(pm_memory_t memory);
/**
 * Makes a memory lazy (`lazy` nonzero) or not. With several hosts, the
 * ranges a task writes into a lazy memory stay on the hosts whose subtasks
 * wrote them, and travel only to the hosts that read them, fetched from the
 * host that holds them; they come to the submitting host only when its own
 * subtasks read them (once they have, later writes to the memory come home
 * beside each chunk's report, the writer still holding them for the other
 * hosts) or the program calls pm_memory_gather(). For
 * iterative programs that do not read intermediate results: no host then
 * serves every other host. By default outputs go home, so that after
 * pm_task_wait the submitting host's copy holds them. On one host this
 * changes nothing. Making a memory not lazy gathers it. PM_EBUSY while an
 * unfinished task uses the memory.
 */
PM_EXPORT int pm_memory_set_lazy(pm_memory_t memory, int lazy);
/**
 * Brings every range of a lazy memory that other hosts hold to the
 * submitting host, so pm_memory_data() shows the results of the tasks that
 * wrote it. pm_memory_data() gathers too while no unfinished task uses the
 * memory. PM_EBUSY while an unfinished task uses it; PM_EHOST if a host
 * holding a range is gone.
 */
PM_EXPORT int pm_memory_gather(pm_memory_t memory);

/* ------------------------------------------------------------------------ */
/* Subtasks and callbacks                                                    */
/* ------------------------------------------------------------------------ */

/** The most memories one task may name. */
#define PM_MAX_TASK_MEMORIES 16

/** How a task or a subscription uses a memory. */
typedef enum pm_access {
    PM_READ = 1,       /**< read only */
    PM_WRITE = 2,      /**< written; subscribed bytes start undefined/identity */
    PM_READ_WRITE = 3  /**< read and written in place */
} pm_access_t;

/**
 * What a callback learns about its subtask.
 *
 * Natural view: `(char *)info->mem[i] + off` is the byte at offset `off` of
 * task memory i, exactly as `serial_base + off` in serial code, for every
 * byte the subtask subscribed. The same holds in CUDA callbacks, where the
 * pointers are device pointers. In a subscribe callback mem[] is NULL.
 */
typedef struct pm_subtask_info {
    uint64_t id;          /**< this subtask, 0 <= id < count */
    uint64_t count;       /**< subtasks in the task */
    int nmem;             /**< memories in the task */
    void *mem[PM_MAX_TASK_MEMORIES];       /**< natural-view base pointers */
    size_t mem_bytes[PM_MAX_TASK_MEMORIES]; /**< sizes of the memories */
    const void *conf;     /**< the task's config blob (same on every host) */
    size_t conf_bytes;
    int host;             /**< host running the subtask */
    int stub;             /**< stub (worker) index on that host */
    pm_device_kind_t device; /**< kind of the stub */
    int device_index;     /**< GPU ordinal for GPU stubs, core index for CPU */
    void *internal;       /**< reserved for pmlib */
} pm_subtask_info_t;

/**
 * In checking mode (PMLIB_CHECK=1) every byte a subtask (CPU or GPU) did not
 * subscribe reads as this value, and writing it is detected afterwards.
 */
#define PM_CHECK_POISON 0xA5

/** Collects the subscriptions of one subtask; passed to subscribe callbacks. */
typedef struct pm_subscription pm_subscription_t;

/**
 * Declares that the subtask reads and/or writes `length` bytes at `offset` of
 * task memory `mem` (an index into the task's memories).
 * PM_ERANGE when the range leaves the memory, PM_EACCESS when the task
 * memory's mode does not allow `access`.
 */
PM_EXPORT int pm_subscribe(pm_subscription_t *sub, int mem, pm_access_t access,
                           size_t offset, size_t length);
/**
 * Strided form: `count` blocks of `block` bytes, the first at `offset`, each
 * `stride` bytes after the previous one (a column of a row-major matrix).
 * Blocks end to end (stride == block) are one contiguous range.
 */
PM_EXPORT int pm_subscribe_strided(pm_subscription_t *sub, int mem,
                                   pm_access_t access, size_t offset,
                                   size_t block, size_t stride, size_t count);

/** Declares a subtask's subscriptions; return 0, or nonzero to fail. */
typedef int (*pm_subscribe_fn)(pm_subscription_t *sub,
                               const pm_subtask_info_t *info);
/** Runs one subtask on a CPU core; return 0, or nonzero to fail. */
typedef int (*pm_cpu_fn)(const pm_subtask_info_t *info);
/**
 * Runs one subtask on a GPU: info->mem[] are device pointers and `stream`
 * is the cudaStream_t to launch on; pmlib synchronizes it afterwards. Return
 * nonzero when a launch fails (check cudaGetLastError after launching).
 */
typedef int (*pm_cuda_fn)(const pm_subtask_info_t *info, void *stream);

/** What a reduce callback is asked to merge. */
typedef struct pm_reduce_info {
    int mem;            /**< task memory being reduced */
    size_t offset;      /**< first byte to merge */
    size_t length;      /**< bytes to merge */
    const void *conf;   /**< the task's config blob */
    size_t conf_bytes;
} pm_reduce_info_t;

/**
 * Merges one output into another: for every byte in
 * [info->offset, info->offset + info->length), combine `from` into `into`
 * (both in the natural view: into + info->offset is the first byte). Must be
 * associative; pmlib calls it in a fixed order (lower subtask ids on the
 * `into` side), so it need not be commutative.
 */
typedef int (*pm_reduce_fn)(const pm_reduce_info_t *info, void *into,
                            const void *from);

/** Says whether a device may run a task's subtasks (1) or not (0). */
typedef int (*pm_device_filter_fn)(pm_device_kind_t kind, int major, int minor,
                                   const void *conf, size_t conf_bytes);

/** A set of callbacks, registered on every host under one name. */
typedef struct pm_callbacks {
    pm_subscribe_fn subscribe;   /**< NULL: the subtasks subscribe nothing */
    pm_cpu_fn cpu;               /**< NULL: not runnable on CPU stubs */
    pm_cuda_fn cuda;             /**< NULL: not runnable on GPU stubs */
    pm_reduce_fn reduce;         /**< for memories reduced with PM_REDUCE_CUSTOM */
    pm_device_filter_fn device_filter; /**< NULL: every device may run them */
} pm_callbacks_t;

/** Zero-fills a callback set; call before setting fields. */
PM_EXPORT int pm_callbacks_init(pm_callbacks_t *cb);
/**
 * Registers a callback set under `name` (at most 63 bytes). Every host must
 * register the same names. PM_EEXIST when the name is taken.
 */
PM_EXPORT int pm_callbacks_register(const char *name, const pm_callbacks_t *cb);

/* ------------------------------------------------------------------------ */
/* Reduce                                                                    */
/* ------------------------------------------------------------------------ */

/** How overlapping outputs of one memory are merged. */
typedef enum pm_reduce_op {
    PM_REDUCE_NONE = 0, /**< writes must not overlap */
    PM_REDUCE_SUM,
    PM_REDUCE_PROD,
    PM_REDUCE_MIN,
    PM_REDUCE_MAX,
    PM_REDUCE_BAND,     /**< integers only */
    PM_REDUCE_BOR,      /**< integers only */
    PM_REDUCE_BXOR,     /**< integers only */
    PM_REDUCE_CUSTOM    /**< the callback set's reduce */
} pm_reduce_op_t;

/** Element types of the built-in reduce ops. */
typedef enum pm_type {
    PM_TYPE_NONE = 0,
    PM_INT32,
    PM_INT64,
    PM_UINT32,
    PM_UINT64,
    PM_FLOAT,
    PM_DOUBLE
} pm_type_t;

/** Size in bytes of one element of `type`, 0 for PM_TYPE_NONE or bad input. */
PM_EXPORT size_t pm_type_size(pm_type_t type);

/* ------------------------------------------------------------------------ */
/* Tasks                                                                     */
/* ------------------------------------------------------------------------ */

/** A task handle. */
typedef struct pm_task {
    uint64_t id;
} pm_task_t;
#define PM_TASK_NULL ((pm_task_t){0})

/** Scheduling policies. */
typedef enum pm_sched {
    PM_SCHED_DEFAULT = 0,      /**< PMLIB_SCHED, else PM_SCHED_PULL */
    PM_SCHED_PULL,             /**< dynamic: take ranges, steal when idle */
    PM_SCHED_STATIC_EQUAL,     /**< equal contiguous shares, no stealing */
    PM_SCHED_STATIC_PROPORTIONAL /**< shares by device speed, no stealing */
} pm_sched_t;

/** Task flags. */
enum {
    PM_TASK_COMPRESS = 1u << 0,      /**< zlib-compress transfers between hosts */
    PM_TASK_COMPRESS_AUTO = 1u << 1, /**< compress when a sample shows it pays */
    PM_TASK_NO_MULTI_ASSIGN = 1u << 2, /**< never run a straggler twice */
    /** Call the subscribe callback for this task even when an earlier task
     * with the same callbacks, subtask count, grain, configuration bytes and
     * memory sizes and modes was subscribed (pmlib reuses those answers
     * otherwise; set this when subscribe depends on anything else). */
    PM_TASK_FRESH_SUBSCRIPTIONS = 1u << 3
};

/** One memory of a task. */
typedef struct pm_task_memory {
    pm_memory_t memory;
    pm_access_t access;      /**< the most any subtask may do with it */
    pm_reduce_op_t reduce;   /**< how overlapping writes merge */
    pm_type_t type;          /**< element type of a built-in reduce */
} pm_task_memory_t;

/**
 * Describes a task. Fill it with pm_task_desc_init() first so that fields
 * added later get their defaults.
 *
 * Reduced memories (reduce != PM_REDUCE_NONE): every subtask writes its
 * subscribed bytes into a private buffer that starts with the op's identity
 * (built-in ops: 0 for sum, 1 for prod, the largest value for min...; custom
 * reduce: zeros) or, with PM_READ_WRITE, with the memory's content. The
 * merged outputs then replace those bytes of the memory. The merge order
 * depends only on subtask ids, so repeated runs give identical bits.
 */
typedef struct pm_task_desc {
    const char *callbacks;   /**< name of a registered callback set */
    uint64_t subtasks;       /**< number of subtasks, > 0 */
    int nmem;                /**< memories used, <= PM_MAX_TASK_MEMORIES */
    pm_task_memory_t mem[PM_MAX_TASK_MEMORIES];
    const void *conf;        /**< config blob copied at submit, may be NULL */
    size_t conf_bytes;
    unsigned flags;          /**< PM_TASK_* */
    pm_sched_t sched;        /**< scheduling policy */
    uint64_t grain;          /**< subtasks per scheduling unit, 0 = automatic */
    int devices;             /**< mask of pm_device_kind, default PM_DEVICE_ANY */
    int min_cc;              /**< minimum GPU compute capability*10, 0 = any */
} pm_task_desc_t;

/** Fills a task descriptor with defaults. */
PM_EXPORT int pm_task_desc_init(pm_task_desc_t *desc);
/**
 * Appends a memory to a descriptor; returns its index (>= 0) or an error.
 * The index is what subscriptions and info->mem[] use.
 */
PM_EXPORT int pm_task_desc_add(pm_task_desc_t *desc, pm_memory_t memory,
                               pm_access_t access);
/** Sets how memory `index` of the descriptor is reduced. */
PM_EXPORT int pm_task_desc_reduce(pm_task_desc_t *desc, int index,
                                  pm_reduce_op_t op, pm_type_t type);

/**
 * Submits a task and returns at once. Tasks run as soon as stubs are free;
 * two tasks that use one memory (and one of them writes it) run in submit
 * order. The descriptor and its conf may be reused after the call.
 */
PM_EXPORT int pm_task_submit(const pm_task_desc_t *desc, pm_task_t *task);
/**
 * Sets *done to 1 when the task finished (returning its status), else to 0
 * (returning 0).
 */
PM_EXPORT int pm_task_test(pm_task_t task, int *done);
/** Waits for a task; returns its status: 0, or why it failed. */
PM_EXPORT int pm_task_wait(pm_task_t task);
/** Waits for every submitted task; returns the first failure, if any. */
PM_EXPORT int pm_task_wait_all(void);

/** What a finished task did. */
typedef struct pm_task_stats {
    int status;               /**< 0 or the task's error */
    uint64_t failed_subtask;  /**< first failing subtask, UINT64_MAX if none */
    int failed_host;          /**< host of that subtask, -1 if none */
    double seconds;           /**< from submit to completion */
    double run_seconds;       /**< from the first subtask to completion */
    uint64_t subtasks;        /**< subtasks run (copies of multi-assigned ones count once) */
    uint64_t subtasks_cpu;    /**< ... on CPU stubs */
    uint64_t subtasks_gpu;    /**< ... on GPU stubs */
    uint64_t subtasks_remote; /**< ... on hosts other than the submitting one */
    uint64_t steals;          /**< ranges taken from another stub */
    uint64_t steals_remote;   /**< ranges taken from another host */
    uint64_t multi_assigned;  /**< subtasks run twice near the end */
    uint64_t bytes_moved;     /**< bytes between hosts, before compression */
    uint64_t bytes_sent;      /**< bytes between hosts, as sent */
    uint64_t bytes_to_gpu;    /**< host to GPU copies */
    uint64_t bytes_from_gpu;  /**< GPU to host copies */
    uint64_t gpu_cache_hits;  /**< subscriptions found on a GPU already */
    int stubs;                /**< stubs of the submitting host that ran a subtask */
    /* Bytes between hosts by host, before compression: */
    uint64_t bytes_home_sent;         /**< ... the submitting host sent */
    uint64_t bytes_home_received;     /**< ... the submitting host received */
    uint64_t bytes_host_sent_max;     /**< ... the host that sent the most sent */
    uint64_t bytes_host_received_max; /**< ... the host that received the most received */
    uint64_t bytes_gpu_peer;  /**< GPU to GPU copies: within a host (peer copies) and between hosts of one machine (CUDA IPC) */
} pm_task_stats_t;

/** Fills `stats` for a finished task (PM_EBUSY while it runs). */
PM_EXPORT int pm_task_stats(pm_task_t task, pm_task_stats_t *stats);
/** Frees a finished task's handle (PM_EBUSY while it runs). */
PM_EXPORT int pm_task_release(pm_task_t task);

/* ------------------------------------------------------------------------ */
/* Redistribution                                                            */
/* ------------------------------------------------------------------------ */

/**
 * Emits `bytes` bytes of variable-length output with an order key from a
 * running subtask (call it from a cpu callback, with the info it got). When
 * the task completes, pmlib gathers every piece of every host on host 0
 * into one new memory: pieces sorted by key, then by subtask id, then in
 * the order a subtask emitted them. pm_task_redistributed() returns it.
 */
PM_EXPORT int pm_redistribute(const pm_subtask_info_t *info, uint64_t key,
                              const void *data, size_t bytes);
/**
 * The memory holding a finished task's redistributed output, or
 * PM_MEMORY_NULL when its subtasks emitted nothing. The program owns it and
 * releases it with pm_memory_release().
 */
PM_EXPORT int pm_task_redistributed(pm_task_t task, pm_memory_t *memory);

#ifdef __cplusplus
}
#endif

#endif /* PMLIB_H */
