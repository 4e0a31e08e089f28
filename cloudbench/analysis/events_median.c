/* The events' running median by sorted blocks (see events_median.py): built with the
 * machine's C compiler on first use, loaded with ctypes (which lets other threads run).
 *
 * cb_slide(x, order, n, k, out): x holds the series padded with +inf to whole blocks of k
 * (plus one block), order[j*k + p] the index inside block j of its p-th smallest value;
 * out[s] = the median of x[s .. s+k-1] for s = 0 .. n-k. k odd. Returns 0, or -1 when out
 * of memory. List nodes are sorted positions + 1; node 0 is a list's head (-inf), k + 1
 * its tail (+inf). On a tie between the lists the first block's value is the smaller.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

int cb_slide(const double *x, const int64_t *order, int64_t n, int64_t k, double *out)
{
    const int64_t h = k / 2, head = 0, tail = k + 1;
    int64_t blocks = (n + k - 1) / k + 1;
    double *va = malloc(sizeof(double) * (size_t)(k + 2));
    double *vb = malloc(sizeof(double) * (size_t)(k + 2));
    int64_t *ra = malloc(sizeof(int64_t) * (size_t)k), *rb = malloc(sizeof(int64_t) * (size_t)k);
    int64_t *na = malloc(sizeof(int64_t) * (size_t)(k + 2)), *pa = malloc(sizeof(int64_t) * (size_t)(k + 2));
    int64_t *nb = malloc(sizeof(int64_t) * (size_t)(k + 2)), *pb = malloc(sizeof(int64_t) * (size_t)(k + 2));
    int rc = 0;
    if (!va || !vb || !ra || !rb || !na || !pa || !nb || !pb) {
        rc = -1;
        goto done;
    }
    va[head] = vb[head] = -INFINITY;
    va[tail] = vb[tail] = INFINITY;
    for (int64_t j = 0; j + 1 < blocks; j++) {
        const int64_t base = j * k;
        if (base > n - k)
            break;
        for (int64_t p = 0; p < k; p++) { /* block j sorted (list A, full), block j + 1 (list B) */
            int64_t ia = order[base + p], ib = order[base + k + p];
            ra[ia] = p + 1;
            rb[ib] = p + 1;
            va[p + 1] = x[base + ia];
            vb[p + 1] = x[base + k + ib];
        }
        for (int64_t p = 0; p < k + 2; p++) {
            na[p] = nb[p] = p + 1;
            pa[p] = pb[p] = p - 1;
        }
        for (int64_t i = k - 1; i >= 0; i--) { /* empty B in reverse order of arrival */
            int64_t node = rb[i];
            nb[pb[node]] = nb[node];
            pb[nb[node]] = pb[node];
        }
        int64_t ca = h + 1, cb = tail, small = h; /* A's h smallest before ca; B empty */
        for (int64_t i = 0; i < k; i++) {
            const int64_t s = base + i;
            out[s] = va[ca] <= vb[cb] ? va[ca] : vb[cb];
            if (s == n - k) /* the last full window: the padding never enters the walk */
                break;
            int64_t a = ra[i]; /* A[i] leaves */
            if (a < ca)
                small--;
            else if (a == ca)
                ca = na[ca];
            na[pa[a]] = na[a];
            pa[na[a]] = pa[a];
            int64_t b = rb[i]; /* B[i] arrives */
            nb[pb[b]] = b;
            pb[nb[b]] = b;
            if (b < cb)
                small++;
            for (;;) {
                if (small < h) { /* the smaller cursor's value joins (A's on a tie) */
                    if (va[ca] <= vb[cb])
                        ca = na[ca];
                    else
                        cb = nb[cb];
                    small++;
                } else if (small > h) { /* the larger value before a cursor leaves (B's on a tie) */
                    if (vb[pb[cb]] >= va[pa[ca]])
                        cb = pb[cb];
                    else
                        ca = pa[ca];
                    small--;
                } else if (va[pa[ca]] > vb[cb]) { /* an A value before its cursor above B's cursor */
                    ca = pa[ca];
                    cb = nb[cb];
                } else if (vb[pb[cb]] >= va[ca]) { /* a B value before its cursor at or above A's */
                    cb = pb[cb];
                    ca = na[ca];
                } else {
                    break;
                }
            }
        }
    }
done:
    free(va); free(vb); free(ra); free(rb); free(na); free(pa); free(nb); free(pb);
    return rc;
}
