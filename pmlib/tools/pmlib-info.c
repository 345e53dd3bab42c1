/*
 * pmlib-info: what pmlib finds where it runs. Prints the library version,
 * whether CUDA support was built, this host's CPU stubs and GPUs and, when
 * started by mpirun, every host's devices as each host reported them.
 * Only host 0 prints.
 */
#include <stdio.h>
#include <string.h>

#include "pmlib.h"

#ifndef PM_HAVE_DEVICE_TABLE
/* Until pmlib.h has the device table, per-device details are not known. */
typedef struct pm_device_info {
    pm_device_kind_t kind;
    char name[96];
    int major, minor;
    size_t mem_bytes;
    int host;
} pm_device_info_t;

static int pm_device_info(int host, int index, pm_device_info_t *out)
{
    (void)host;
    (void)index;
    (void)out;
    return PM_ENOTSUP;
}
#endif

static void usage(FILE *f)
{
    fprintf(f, "usage: pmlib-info [--help]\n"
               "Prints the pmlib version, whether it was built with CUDA, and the CPU stubs\n"
               "and GPUs pmlib uses on this host; under mpirun, those of every host.\n"
               "PMLIB_NCPU, PMLIB_NGPU and PMLIB_CUDA_DEVICES change what it finds.\n");
}

static double gib(size_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0 * 1024.0);
}

/* Lists the GPUs of `host`; counts its CPU stubs into *ncpu. False when
 * this pmlib cannot describe devices. */
static int list_devices(int host, int *ncpu, int *ngpu, int print)
{
    pm_device_info_t d;
    int rc = 0;
    *ncpu = *ngpu = 0;
    for (int i = 0; (rc = pm_device_info(host, i, &d)) == PM_OK; i++) {
        if (d.kind == PM_DEVICE_CPU) {
            ++*ncpu;
            continue;
        }
        if (print && *ngpu == 0)
            printf("  %-4s %-36s %-5s %s\n", "gpu", "name", "cc", "memory");
        if (print)
            printf("  %-4d %-36s %d.%-3d %.1f GiB\n", *ngpu, d.name, d.major, d.minor,
                   gib(d.mem_bytes));
        ++*ngpu;
    }
    return rc != PM_ENOTSUP;
}

static void print_this_host(void)
{
    int ncpu = 0, ngpu = 0, c, g;
    pm_device_count(PM_DEVICE_CPU, &ncpu);
    pm_device_count(PM_DEVICE_GPU, &ngpu);
    printf("host %d of %d: %d CPU stub%s, %d GPU%s\n", pm_host_id(), pm_host_count(), ncpu,
           ncpu == 1 ? "" : "s", ngpu, ngpu == 1 ? "" : "s");
    if (ngpu > 0 && !list_devices(pm_host_id(), &c, &g, 1))
        printf("  (this pmlib cannot describe its GPUs: no pm_device_info)\n");
}

static void print_cluster(void)
{
    int c, g;
    if (pm_host_count() < 2)
        return;
    if (!list_devices(0, &c, &g, 0)) {
        printf("\ncluster: %d hosts (this pmlib cannot describe them: no pm_device_info)\n",
               pm_host_count());
        return;
    }
    printf("\ncluster: %d hosts\n  %-5s %-5s %s\n", pm_host_count(), "host", "cpus", "gpus");
    for (int h = 0; h < pm_host_count(); h++) {
        list_devices(h, &c, &g, 0);
        printf("  %-5d %-5d %d\n", h, c, g);
    }
    for (int h = 0; h < pm_host_count(); h++) {
        list_devices(h, &c, &g, 0);
        if (g > 0) {
            printf("\nhost %d:\n", h);
            list_devices(h, &c, &g, 1);
        }
    }
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        fprintf(stderr, "pmlib-info: unknown argument '%s'\n", argv[i]);
        usage(stderr);
        return 2;
    }
    int rc = pm_init(&argc, &argv);
    if (rc != PM_OK) {
        fprintf(stderr, "pmlib-info: pm_init failed: %s (%s)\n", pm_strerror(rc), pm_errname(rc));
        return 1;
    }
    if (pm_host_id() == 0) {
        printf("pmlib %s (headers %s)\n", pm_version(), PMLIB_VERSION_STRING);
        printf("CUDA support: %s\n", PMLIB_HAVE_CUDA ? "built in" : "not built");
        print_this_host();
        print_cluster();
    }
    rc = pm_finalize();
    return rc == PM_OK ? 0 : 1;
}
