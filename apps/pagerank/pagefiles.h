/*
 * pagerank's files (pagefiles.c): graphs as edge lists or Matrix Market,
 * page names, and the ranks written out or the highest printed. Apart from
 * pagerank.c so that it shows only the computation.
 */
#ifndef PAGEFILES_H
#define PAGEFILES_H

#include <stdint.h>
#include <stdio.h>

/* Page ids are uint32_t; the largest is one less. */
#define PAGE_LIMIT 4294967295u

/** A graph's links as read from a file, before they become CSR. */
struct edge_list {
    uint64_t n, cap, pages; /* links, room, pages (ids 0 .. pages - 1) */
    uint32_t *src, *dst;
    unsigned base;          /* the file's first id: 0, or 1 (Matrix Market) */
};

/**
 * Reads a graph: a Matrix Market coordinate file when the first line says
 * "%%MatrixMarket", an edge list ("src dst" per line, ids from 0) otherwise.
 * Returns 0, or -1 after one line on stderr naming the file and line.
 */
int pf_read_graph(const char *prog, const char *path, struct edge_list *el);

/** Frees what pf_read_graph allocated. */
void pf_free_graph(struct edge_list *el);

/**
 * Reads "id name" lines (ids as in the graph's file, starting at `base`;
 * the name is the rest of the line) into a new array of `pages` names,
 * NULL where the file names no page. Ids beyond the graph are skipped.
 * Returns NULL after one line on stderr naming the file and line.
 */
char **pf_read_names(const char *prog, const char *path, uint64_t pages,
                     unsigned base);

void pf_free_names(char **names, uint64_t pages);

/**
 * Writes "page rank" lines (or "name rank" for named pages) for every page
 * in id order; ranks with 17 significant digits. Returns 0, or -1 with
 * errno set by the failed write.
 */
int pf_write_ranks(FILE *f, const double *rank, uint64_t pages,
                   char *const *names, unsigned base);

/**
 * Prints the k pages of highest rank, highest first (ties: lower id first),
 * one "  i. page rank" line each. Returns 0, or -1 when out of memory.
 */
int pf_print_top(const double *rank, uint64_t pages, uint64_t k,
                 char *const *names, unsigned base);

#endif /* PAGEFILES_H */
