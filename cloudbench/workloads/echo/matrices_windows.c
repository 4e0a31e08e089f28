/* A steady sender's window statistics (matrices.WindowLayout.stats) from a peer's matrix row,
 * window by window: the count, the sum and the median of the RTTs in each span of rounds.
 *
 * Cells hold 0 (no row), 1 (no reply) or RTT + 2. A span's RTTs are gathered into a buffer (in
 * cache) and the order statistic wanted found by sample-bracketed selection (Floyd & Rivest
 * 1975, "Algorithm 489: SELECT"): two values of a small sorted sample that bracket the wanted
 * rank keep, in one pass, the values between them (a few percent), and the selection goes on
 * among those; when the bracket misses, a three-way partition round (Hoare's FIND) on the
 * sample's middle value takes over for that step. Exact, like numpy's partition it replaces.
 * Built and loaded by cloudbench.core.ckernels; called through ctypes, which releases the GIL. */
#include <stdint.h>
#include <string.h>

#define SAMPLE 32
#define FEW 48
#define REACH 3 /* the bracket: the sample values REACH ranks either side of the wanted one */

#define SELECT(NAME, T)                                                                        \
    static void NAME##_isort(T *a, int64_t n) {                                                \
        for (int64_t i = 1; i < n; i++) {                                                      \
            T x = a[i];                                                                        \
            int64_t j = i;                                                                     \
            for (; j > 0 && a[j - 1] > x; j--) a[j] = a[j - 1];                                \
            a[j] = x;                                                                          \
        }                                                                                      \
    }                                                                                          \
    /* The k-th smallest (0-based) of a[0 .. n): a is only permuted; b1 and b2 hold n values. */ \
    static T NAME(T *a, int64_t n, int64_t k, T *b1, T *b2) {                                  \
        T *next = b1;                                                                          \
        for (;;) {                                                                             \
            if (n <= FEW) {                                                                    \
                NAME##_isort(a, n);                                                            \
                return a[k];                                                                   \
            }                                                                                  \
            T s[SAMPLE];                                                                       \
            for (int64_t i = 0; i < SAMPLE; i++) s[i] = a[(i * n) / SAMPLE + n / (2 * SAMPLE)]; \
            NAME##_isort(s, SAMPLE);                                                           \
            int64_t r = (k * SAMPLE) / n;                                                      \
            T lo = r - REACH >= 0 ? s[r - REACH] : 0;                                          \
            T hi = r + REACH < SAMPLE ? s[r + REACH] : (T)~(T)0;                               \
            int64_t below = 0, m = 0;                                                          \
            for (int64_t i = 0; i < n; i++) {                                                  \
                T x = a[i];                                                                    \
                next[m] = x;                                                                   \
                m += (x >= lo) & (x <= hi);                                                    \
                below += x < lo;                                                               \
            }                                                                                  \
            if (k >= below && k < below + m && m < n) {                                        \
                T *was = a;                                                                    \
                a = next;                                                                      \
                next = was == b1 || was == b2 ? was : (next == b1 ? b2 : b1);                  \
                n = m;                                                                         \
                k -= below;                                                                    \
                continue;                                                                      \
            }                                                                                  \
            T p = s[r];                                                                        \
            int64_t lt = 0;                                                                    \
            for (int64_t i = 0; i < n; i++) {                                                  \
                T x = a[i];                                                                    \
                a[i] = a[lt];                                                                  \
                a[lt] = x;                                                                     \
                lt += x < p;                                                                   \
            }                                                                                  \
            if (k < lt) {                                                                      \
                n = lt;                                                                        \
                continue;                                                                      \
            }                                                                                  \
            int64_t eq = lt;                                                                   \
            for (int64_t i = lt; i < n; i++) {                                                 \
                T x = a[i];                                                                    \
                a[i] = a[eq];                                                                  \
                a[eq] = x;                                                                     \
                eq += x == p;                                                                  \
            }                                                                                  \
            if (k < eq) return p;                                                              \
            a += eq;                                                                           \
            n -= eq;                                                                           \
            k -= eq;                                                                           \
        }                                                                                      \
    }

SELECT(kth_u32, uint32_t)
SELECT(kth_u64, uint64_t)

/* Window i holds rounds first + i·length .. first + (i+1)·length - 1 of cells[0 .. n) (rounds
 * outside them hold nothing). Per window: counts[i] its RTTs, sums[i] their sum (wrapping like
 * numpy's int64) and med[i] their median ((lower + upper) / 2 in doubles, as numpy computes it;
 * untouched without RTTs). scratch: room for 3·length values. */
#define STATS(NAME, T, KTHF)                                                                   \
    void NAME(const T *cells, int64_t n, int64_t first, int64_t length, int64_t windows,       \
              int64_t *counts, int64_t *sums, double *med, T *scratch) {                       \
        T *b1 = scratch + length, *b2 = scratch + 2 * length;                                  \
        for (int64_t w = 0; w < windows; w++) {                                                \
            int64_t a = first + w * length, b = a + length;                                    \
            if (a < 0) a = 0;                                                                  \
            if (b > n) b = n;                                                                  \
            int64_t c = 0;                                                                     \
            uint64_t s = 0;                                                                    \
            for (int64_t r = a; r < b; r++) {                                                  \
                T x = (T)(cells[r] - 2);                                                       \
                int ok = cells[r] >= 2;                                                        \
                scratch[c] = x;                                                                \
                c += ok;                                                                       \
                s += ok ? (uint64_t)x : 0;                                                     \
            }                                                                                  \
            counts[w] = c;                                                                     \
            sums[w] = (int64_t)s;                                                              \
            if (!c) continue;                                                                  \
            int64_t k = c / 2;                                                                 \
            T upper = KTHF(scratch, c, k, b1, b2), lower = upper;                              \
            if (c % 2 == 0) { /* the largest below upper, when k values lie below it */        \
                int64_t under = 0;                                                             \
                T best = 0;                                                                    \
                for (int64_t i = 0; i < c; i++) {                                              \
                    T x = scratch[i];                                                          \
                    T y = x < upper ? x : 0; /* no branch: half the values are below */       \
                    under += x < upper;                                                        \
                    best = y > best ? y : best;                                                \
                }                                                                              \
                if (under == k) lower = best;                                                  \
            }                                                                                  \
            med[w] = ((double)lower + (double)upper) / 2.0;                                    \
        }                                                                                      \
    }
STATS(cb_window_stats_u32, uint32_t, kth_u32)
STATS(cb_window_stats_u64, uint64_t, kth_u64)
