"""Inputs for the sample apps and independent checks of their outputs, in
NumPy: the tests/apps/*-numpy.sh scripts write inputs with a fixed seed,
run an app on them, and ask this program whether what the app wrote agrees
with NumPy's own computation.

    numpy-check.py fft2d-input DIR NAME ROWS COLS   DIR/NAME.npy, complex64
    numpy-check.py fft2d DIR IN OUT                 OUT vs numpy.fft.fft2(IN)
    numpy-check.py matmul-input DIR NAME M K N      DIR/NAME-a.npy, -b.npy
    numpy-check.py matmul DIR A B C                 C vs A @ B
    numpy-check.py pagerank-graph DIR NAME KIND N   DIR/NAME.txt, an edge list
    numpy-check.py pagerank DIR GRAPH RANKS TOL ITERS
                                                    RANKS vs two references

Every check also runs on a reference with one value perturbed just past
its bound and must then report a mismatch, so that a check that cannot
fail does not pass. Exit status: 0 when the app's output agrees, 1 when it
does not (one line saying where), 2 for a usage error.
"""
import os
import sys

import numpy as np

SEED = 20240514
U32 = 2.0 ** -24  # unit roundoff of float32


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def rng_for(name):
    """A generator seeded by the fixed seed and the input's name."""
    return np.random.default_rng([SEED] + [ord(c) for c in name])


def load(path, dtype, ndim):
    x = np.load(path)
    if x.dtype != np.dtype(dtype) or x.ndim != ndim:
        fail("%s: %s of %d dimensions, expected %s of %d"
             % (path, x.dtype, x.ndim, np.dtype(dtype), ndim))
    return x


def must_fail(check, *args):
    """The check given a reference perturbed past its bound must fail."""
    if check(*args) is None:
        fail("the check accepted a perturbed reference: it cannot fail")


# -- fft2d ------------------------------------------------------------------

FFT_BOUND = 1e-5  # max |F - ref| / max |ref|; float32 FFTs reach ~1e-7


def fft2d_input(d, name, rows, cols):
    r = rng_for(name)
    a = (r.standard_normal((rows, cols)) +
         1j * r.standard_normal((rows, cols))).astype(np.complex64)
    np.save(os.path.join(d, name + ".npy"), a)


def fft2d_error(f, ref):
    """None when f is within the bound of ref, else what is wrong."""
    if f.shape != ref.shape:
        return "shape %s, numpy %s" % (f.shape, ref.shape)
    diff = np.abs(f.astype(np.complex128) - ref)
    err = diff.max() / np.abs(ref).max()
    if not err < FFT_BOUND:  # NaN fails too
        i = np.unravel_index(np.argmax(diff), diff.shape)
        return ("max |F - fft2| / max |fft2| = %.3g (bound %g); worst at %s: "
                "%s, numpy %s" % (err, FFT_BOUND, i, f[i], ref[i]))
    return None


def fft2d(d, inp, out):
    a = load(os.path.join(d, inp), np.complex64, 2)
    f = load(os.path.join(d, out), np.complex64, 2)
    ref = np.fft.fft2(a.astype(np.complex128))  # unnormalized, as the app
    bad = fft2d_error(f, ref)
    if bad is not None:
        fail("%s: %s" % (out, bad))
    # a reference off by 10x the bound at one element, then the transform
    # along one axis only: both must be told apart
    wrong = ref.copy()
    wrong.flat[wrong.size // 2] += 10 * FFT_BOUND * np.abs(ref).max()
    must_fail(fft2d_error, f, wrong)
    if min(a.shape) > 1:
        must_fail(fft2d_error, f, np.fft.fft(a.astype(np.complex128), axis=1))
    err = np.abs(f - ref).max() / np.abs(ref).max()
    print("ok: %s is numpy.fft.fft2 of %s %s (max error %.2g of max |F|)"
          % (out, inp, a.shape, err))


# -- matmul -----------------------------------------------------------------

def matmul_input(d, name, m, k, n):
    r = rng_for(name)
    np.save(os.path.join(d, name + "-a.npy"),
            r.uniform(-1, 1, (m, k)).astype(np.float32))
    np.save(os.path.join(d, name + "-b.npy"),
            r.standard_normal((k, n)).astype(np.float32))


def matmul_error(c, ref, scale, k):
    """
    None when every |C - ref| <= 1.01 k u (|A||B|), else what is wrong: a
    float32 dot product of length k in any order (with or without fused
    multiply-adds) is within gamma_k (|A||B|) of the exact one, which the
    float64 product stands for (its own error is 2^29 times smaller).
    """
    if c.shape != ref.shape:
        return "shape %s, numpy %s" % (c.shape, ref.shape)
    bound = 1.01 * k * U32
    rel = np.abs(c.astype(np.float64) - ref) / np.maximum(scale, 1e-300)
    if not rel.max() <= bound:
        i = np.unravel_index(np.nanargmax(rel), rel.shape)
        return ("|C - A@B| / (|A||B|) = %.3g at %s (bound %.3g): %r, numpy %r"
                % (rel[i], i, bound, float(c[i]), ref[i]))
    return None


def matmul(d, fa, fb, fc):
    a = load(os.path.join(d, fa), np.float32, 2).astype(np.float64)
    b = load(os.path.join(d, fb), np.float32, 2).astype(np.float64)
    c = load(os.path.join(d, fc), np.float32, 2)
    ref = a @ b
    scale = np.abs(a) @ np.abs(b)
    k = a.shape[1]
    bad = matmul_error(c, ref, scale, k)
    if bad is not None:
        fail("%s: %s" % (fc, bad))
    wrong = ref.copy()
    i = (ref.shape[0] // 2, ref.shape[1] - 1)
    wrong[i] += 3 * k * U32 * scale[i]
    must_fail(matmul_error, c, wrong, scale, k)
    if a.shape == b.shape and k > 1:  # the factors swapped
        must_fail(matmul_error, c, b @ a, scale, k)
    rel = np.abs(c - ref) / np.maximum(scale, 1e-300)
    print("ok: %s is %s @ %s, %d x %d x %d (max error %.2g of |A||B|, bound "
          "%.2g)" % (fc, fa, fb, a.shape[0], k, b.shape[1], rel.max(),
                     1.01 * k * U32))


# -- pagerank ---------------------------------------------------------------

DAMPING = 0.85


def pagerank_graph(d, name, kind, n):
    """
    random: n pages, about 6 links each from most, one page in 8 dangling,
    some self-links and repeated links; cycle: i -> i + 1 mod n; star: every
    other page links to page 0, which links nowhere.
    """
    if kind == "random":
        r = rng_for(name)
        deg = r.integers(1, 12, n)
        deg[r.random(n) < 0.125] = 0
        src = np.repeat(np.arange(n), deg)
        dst = r.integers(0, n, src.size)
        dst[::17] = src[::17]  # self-links
        src = np.concatenate([src, src[:9]])  # repeated links
        dst = np.concatenate([dst, dst[:9]])
        src[-1], dst[-1] = n - 1, 0  # the last page exists
        order = r.permutation(src.size)  # in no particular order
        src, dst = src[order], dst[order]
    elif kind == "cycle":
        src = np.arange(n)
        dst = (src + 1) % n
    elif kind == "star":
        src = np.arange(1, n)
        dst = np.zeros(n - 1, dtype=int)
    else:
        print("numpy-check: unknown graph kind " + kind)
        sys.exit(2)
    with open(os.path.join(d, name + ".txt"), "w") as f:
        f.write("# %s graph of %d pages\n" % (kind, n))
        for s, t in zip(src, dst):
            f.write("%d %d\n" % (s, t))


def read_edges(path):
    e = np.loadtxt(path, dtype=np.int64, comments="#", ndmin=2)
    return e[:, 0], e[:, 1], int(e.max()) + 1


def power_iteration(src, dst, n, tol, iters):
    """
    The app's definition, by other means (a scatter with bincount where the
    app gathers over in-links): from rank 1/n, next = (1 - d)/n + d (D/n +
    sum over u -> v of rank[u]/outdeg[u]), D the rank of dangling pages;
    stops after `iters` iterations or once the L1 change is below tol.
    """
    outdeg = np.bincount(src, minlength=n).astype(np.float64)
    dangling = outdeg == 0
    inv = np.zeros(n)
    inv[~dangling] = 1.0 / outdeg[~dangling]
    rank = np.full(n, 1.0 / n)
    for _ in range(iters):
        pulled = np.bincount(dst, weights=(rank * inv)[src], minlength=n)
        nxt = ((1 - DAMPING) / n + DAMPING * rank[dangling].sum() / n +
               DAMPING * pulled)
        change = np.abs(nxt - rank).sum()
        rank = nxt
        if change < tol:
            break
    return rank


def fixed_point(src, dst, n):
    """The ranks the iteration converges to, from one linear solve:
    (I - d M) r = (1 - d)/n, M the link matrix with dangling pages'
    rank spread over all pages (each column sums to 1)."""
    outdeg = np.bincount(src, minlength=n).astype(np.float64)
    m = np.zeros((n, n))
    np.add.at(m, (dst, src), 1.0 / outdeg[src])
    m[:, outdeg == 0] = 1.0 / n
    return np.linalg.solve(np.eye(n) - DAMPING * m,
                           np.full(n, (1 - DAMPING) / n))


def closed_form(kind, n):
    """Ranks by formula, for the graphs that have one (else None)."""
    d = DAMPING
    if kind == "cycle":
        return np.full(n, 1.0 / n)  # every page alike
    if kind == "star":
        # hub: r0 = (1-d)/n + d r0/n + d (1 - r0), its own dangling rank
        # spread back and all the leaves' rank; a leaf gets (1-d)/n + d r0/n
        r0 = ((1 - d) / n + d) / (1 + d - d / n)
        r = np.full(n, (1 - d) / n + d * r0 / n)
        r[0] = r0
        return r
    return None


def ranks_error(got, ref, bound):
    if got.shape != ref.shape:
        return "%d ranks, expected %d" % (got.size, ref.size)
    diff = np.abs(got - ref)
    if not diff.max() <= bound:
        v = int(np.nanargmax(diff))
        return ("page %d: %.17g, reference %.17g (|diff| %.3g, bound %g)"
                % (v, got[v], ref[v], diff[v], bound))
    return None


def pagerank(d, graph, ranks, tol, iters):
    src, dst, n = read_edges(os.path.join(d, graph))
    kind = open(os.path.join(d, graph)).readline().split()[1]
    lines = np.loadtxt(os.path.join(d, ranks), ndmin=2)
    if lines.shape != (n, 2) or not np.array_equal(lines[:, 0], np.arange(n)):
        fail("%s: not one 'page rank' line per page 0 .. %d in order"
             % (ranks, n - 1))
    got = lines[:, 1]
    tol, iters = float(tol), int(iters)
    # The same iteration: only the order of additions differs.
    same = 1e-12
    ref = power_iteration(src, dst, n, tol, iters)
    bad = ranks_error(got, ref, same)
    if bad is not None:
        fail("%s vs the numpy power iteration: %s" % (ranks, bad))
    wrong = ref.copy()
    wrong[n // 3] += 10 * same
    must_fail(ranks_error, got, wrong, same)
    if n > 2 and ref[0] != ref[1]:
        must_fail(ranks_error, got, ref[np.r_[1, 0, 2:n]], same)
    # The limit, by a linear solve and by formula: the iteration stops
    # within tol d / (1 - d) of it (in L1), which the bound leaves room for.
    near = max(1e-11, 10 * tol * DAMPING / (1 - DAMPING))
    exact = fixed_point(src, dst, n)
    if abs(exact.sum() - 1) > 1e-12:
        fail("the linear solve's ranks sum to %.17g" % exact.sum())
    bad = ranks_error(got, exact, near)
    if bad is not None:
        fail("%s vs the linear solve: %s" % (ranks, bad))
    formula = closed_form(kind, n)
    what = "the power iteration and the linear solve"
    if formula is not None:
        bad = ranks_error(got, formula, near)
        if bad is not None:
            fail("%s vs the closed form of the %s: %s" % (ranks, kind, bad))
        wrong = formula.copy()
        wrong[-1] += 10 * near
        must_fail(ranks_error, got, wrong, near)
        what += " and the closed form"
    print("ok: %s (%s, %d pages, %d links) matches %s (max |diff| %.2g)"
          % (ranks, kind, n, src.size, what, np.abs(got - exact).max()))


COMMANDS = {
    "fft2d-input": (fft2d_input, (str, str, int, int)),
    "fft2d": (fft2d, (str, str, str)),
    "matmul-input": (matmul_input, (str, str, int, int, int)),
    "matmul": (matmul, (str, str, str, str)),
    "pagerank-graph": (pagerank_graph, (str, str, str, int)),
    "pagerank": (pagerank, (str, str, str, str, str)),
}


def main(argv):
    if len(argv) < 2 or argv[1] not in COMMANDS:
        print(__doc__)
        return 2
    fn, types = COMMANDS[argv[1]]
    if len(argv) - 2 != len(types):
        print("numpy-check: %s takes %d arguments" % (argv[1], len(types)))
        return 2
    fn(*[t(v) for t, v in zip(types, argv[2:])])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
