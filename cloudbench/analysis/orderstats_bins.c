/* The histogram bins of orderstats.value_bins, in one pass over the echo scan's RTTs.
 *
 * A value's bin: the bits of (double) v shifted right by `shift`, less `base`, clipped to
 * 0 .. nbins - 1 (orderstats.value_bins does the same in four numpy passes). Built and
 * loaded by cloudbench.core.ckernels; called through ctypes, which releases the GIL. */
#include <stdint.h>
#include <string.h>

static inline int64_t bin_of(double x, int shift, int64_t base, int64_t top) {
    int64_t b;
    memcpy(&b, &x, sizeof b);
    b = (b >> shift) - base;
    return b < 0 ? 0 : b > top ? top : b;
}

/* hist[bin(v[i])] += 1 for every i. */
#define HIST(NAME, T)                                                                          \
    void NAME(const T *v, int64_t n, int shift, int64_t base, int64_t nbins, int64_t *hist) {   \
        for (int64_t i = 0; i < n; i++) hist[bin_of((double)v[i], shift, base, nbins - 1)]++;  \
    }
HIST(cb_hist_u32, uint32_t)
HIST(cb_hist_u64, uint64_t)

/* The cells that hold an RTT (stored as RTT + 2; 0 and 1 hold none) whose bin `need` marks:
 * their bins and RTTs in order into out_bins and out_vals (room for `room`); returns how many
 * there were (more than `room`: the caller's count was wrong, nothing past it written). */
#define SELECT(NAME, T)                                                                        \
    int64_t NAME(const T *cells, int64_t n, const uint8_t *need, int shift, int64_t base,      \
                 int64_t nbins, int64_t *out_bins, int64_t *out_vals, int64_t room) {          \
        int64_t k = 0;                                                                         \
        for (int64_t i = 0; i < n; i++) {                                                      \
            T c = cells[i];                                                                    \
            if (c < 2) continue;                                                               \
            T v = c - 2;                                                                       \
            int64_t b = bin_of((double)v, shift, base, nbins - 1);                             \
            if (!need[b]) continue;                                                            \
            if (k < room) { out_bins[k] = b; out_vals[k] = (int64_t)v; }                       \
            k++;                                                                               \
        }                                                                                      \
        return k;                                                                              \
    }
SELECT(cb_select_u32, uint32_t)
SELECT(cb_select_u64, uint64_t)
