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
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

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

/* ---- The level by counting, for RTTs on a grid (whole µs in ms: the echo scan's) ----------
 *
 * cb_level(y, n, half, scale, level, resid, absr, key): when every y[i] is an integer multiple of
 * 1 / scale (k = rint(y[i]·scale) with k / scale == y[i], so k / scale gives y[i] back and the
 * keys order the values as the values do) with |k| < 2^31 - 1, `half` < 32,768 and no median lies CB_RANGE keys or
 * more above the smallest value,
 * level[i] = the median of y over the window of i and `half` values either side, the ends
 * mirrored (scipy's mode "mirror": y[-j] = y[j], y[n-1+j] = y[n-1-j]); resid[i] = y[i] -
 * level[i]; absr[i] = |resid[i]|. The window's values are counted per key (one counter a key,
 * calloc'd: only the pages of keys that occur are ever mapped), with a bit a key that holds any,
 * a flag a line of 8 words of bits and a flag a group of 64 lines that may hold any; a cursor on
 * the median's key moves as one value leaves and one arrives (by one key with a value at most),
 * to the next key with a value: found without a branch by a bit scan of its word and the words
 * either side, further away by the flags. O(1) a step. Returns 0; 1 when a
 * value is off the grid, 2 when a median lies too far above the smallest value, 3 when `half`
 * is out of range,
 * -1 without memory. key: n int32 of the caller's, overwritten (the values' keys: 32 bits halve
 * the memory traffic of their write and two reads); level may be NULL (not written: the
 * caller works out the level of a few ranges when it needs them).
 */
#define CB_RANGE ((int64_t)1 << 20) /* keys counted one by one from the smallest; those above share one */
#define CB_MAGIC 6755399441055744.0 /* 1.5·2^52: x + it − it rounds |x| < 2^51 to the even integer */

typedef struct {
    uint16_t *n;    /* values a key holds */
    uint64_t *bits; /* a bit a key that holds any; bits[-1] and the words past the last key are 0 */
    uint8_t *l2;    /* a byte a line of 8 words: 0 when the line holds no key (set on every add,
                       cleared when a search finds the line empty) */
    uint8_t *l3;    /* a byte a group of 64 lines: likewise */
} cb_counts;

/* The summaries are written by stores alone (no read-modify-write of a byte or word that the
 * neighbouring steps' updates also touch: a chain through memory of ~5 cycles each); a flag
 * may stay set over an empty line until a search passes it, which clears it. */
static inline void cb_add(cb_counts *c, int64_t key)
{
    const int64_t w = key >> 6;
    c->n[key]++;
    c->bits[w] |= (uint64_t)1 << (key & 63);
    c->l2[w >> 3] = 1;
    c->l3[w >> 9] = 1;
}

static inline void cb_remove(cb_counts *c, int64_t key)
{
    const int64_t w = key >> 6;
    const uint64_t bit = (uint64_t)1 << (key & 63), left = (uint64_t)(--c->n[key] != 0);
    c->bits[w] = (c->bits[w] & ~bit) | (bit & (uint64_t)-left); /* without a branch: a coin toss */
}

static inline int cb_line_empty(const cb_counts *c, int64_t line)
{
    const uint64_t *b = c->bits + (line << 3);
    return !(b[0] | b[1] | b[2] | b[3] | b[4] | b[5] | b[6] | b[7]);
}

static inline int cb_group_empty(const cb_counts *c, int64_t group)
{
    const uint8_t *f = c->l2 + (group << 6);
    uint64_t any = 0;
    for (int j = 0; j < 64; j++)
        any |= f[j];
    return !any;
}

/* the first word at or after w with a key (one exists) */
static int64_t cb_word_up(cb_counts *c, int64_t w)
{
    for (;;) {
        if ((w & 7) == 0) { /* a line's first word: skip the lines (and groups) without keys */
            const int64_t line = w >> 3;
            if ((line & 63) == 0 && c->l3[line >> 6] && cb_group_empty(c, line >> 6))
                c->l3[line >> 6] = 0;
            if ((line & 63) == 0 && !c->l3[line >> 6]) {
                w += 512;
                continue;
            }
            if (c->l2[line] && cb_line_empty(c, line))
                c->l2[line] = 0;
            if (!c->l2[line]) {
                w += 8;
                continue;
            }
        }
        if (c->bits[w])
            return w;
        w++;
    }
}

/* the last word at or before w with a key (one exists) */
static int64_t cb_word_down(cb_counts *c, int64_t w)
{
    for (;;) {
        if ((w & 7) == 7) { /* a line's last word */
            const int64_t line = w >> 3;
            if ((line & 63) == 63 && c->l3[line >> 6] && cb_group_empty(c, line >> 6))
                c->l3[line >> 6] = 0;
            if ((line & 63) == 63 && !c->l3[line >> 6]) {
                w -= 512;
                continue;
            }
            if (c->l2[line] && cb_line_empty(c, line))
                c->l2[line] = 0;
            if (!c->l2[line]) {
                w -= 8;
                continue;
            }
        }
        if (c->bits[w])
            return w;
        w--;
    }
}

/* the smallest key > m with a value (one exists) */
static int64_t cb_next(cb_counts *c, int64_t m)
{
    const int64_t k = m + 1, w = k >> 6;
    const uint64_t rest = c->bits[w] & (~(uint64_t)0 << (k & 63));
    if (rest)
        return (w << 6) + __builtin_ctzll(rest);
    const int64_t u = cb_word_up(c, w + 1);
    return (u << 6) + __builtin_ctzll(c->bits[u]);
}

/* the largest key < m with a value (one exists) */
static int64_t cb_prev(cb_counts *c, int64_t m)
{
    const int64_t k = m - 1, w = k >> 6;
    const uint64_t rest = c->bits[w] & (~(uint64_t)0 >> (63 - (k & 63)));
    if (rest)
        return (w << 6) + 63 - __builtin_clzll(rest);
    const int64_t d = cb_word_down(c, w - 1);
    return (d << 6) + 63 - __builtin_clzll(c->bits[d]);
}

static inline int64_t cb_mirror(int64_t i, int64_t n)
{
    return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i);
}

/* One step of the window: the value of key `out` leaves, that of key `in` arrives, and the
 * median's key *m (with *below, the window's values under it) follows. Before and after:
 * *below <= half < *below + n[*m]. */
static inline __attribute__((always_inline)) void cb_step(cb_counts *c, int64_t half, int64_t out, int64_t in,
                                                         int64_t *mp, int64_t *belowp)
{
    int64_t m = *mp, below = *belowp;
    cb_remove(c, out);
    cb_add(c, in);
    below += (in < m) - (out < m);
    /* one value left and one arrived: the median moves by one key with a value at most,
     * down when more than half lie under it, up when half or fewer lie at or under it
     * (a coin toss each step, so decided without a branch from the keys next to m in its
     * word or the words either side; further away is a search by the summaries) */
    const int64_t nm = c->n[m];
    const int down = below > half, up = below + nm <= half;
    const int64_t w = m >> 6;
    const uint64_t at = (uint64_t)1 << (m & 63), word = c->bits[w];
    const uint64_t under = word & (at - 1), over = word & ~(at | (at - 1));
    const uint64_t before = c->bits[w - 1], after = c->bits[w + 1];
    if ((down & ((under | before) == 0)) | (up & ((over | after) == 0))) {
        if (down) {
            m = cb_prev(c, m);
            below -= c->n[m];
        } else {
            below += nm;
            m = cb_next(c, m);
        }
    } else { /* the next key with a value under m (p) and over it (q), and the move, by masks:
              * gcc made branches of the ternaries, each a coin toss: ~8 % of the kernel */
        const uint64_t in_u = -(uint64_t)(under != 0), in_o = -(uint64_t)(over != 0);
        const uint64_t lower = (under & in_u) | (before & ~in_u), upper = (over & in_o) | (after & ~in_o);
        const int64_t p = ((w - 1) << 6) + (int64_t)(in_u & 64) + 63 - __builtin_clzll(lower | 1);
        const int64_t q = ((w + 1) << 6) - (int64_t)(in_o & 64) + __builtin_ctzll(upper | (uint64_t)1 << 63);
        const int64_t dm = -(int64_t)down, um = -(int64_t)up;
        const int64_t to = (p & dm) | (q & um) | (m & ~(dm | um));
        below += (nm & um) - ((int64_t)c->n[to] & dm);
        m = to;
    }
    *mp = m;
    *belowp = below;
}

/* y[i]'s level, residual and |residual| for the median's key m (every step: a branch on a
 * change mispredicts); 0, or 1 when m is the key of the values too far above the smallest */
static inline __attribute__((always_inline)) int cb_put(int64_t i, int64_t m, int64_t lo, double scale,
                                                        const double *y, double *level, double *resid,
                                                        double *absr)
{
    if (m == CB_RANGE)
        return 1;
    const double v = (double)(m + lo) / scale, r = y[i] - v;
    if (level)
        level[i] = v;
    resid[i] = r;
    absr[i] = fabs(r);
    return 0;
}

int cb_level(const double *y, int64_t n, int64_t half, double scale, double *level,
             double *resid, double *absr, int32_t *key)
{
    if (half < 1 || half > (n - 1) / 2 || half > 32767)
        return 3;
    int64_t lo = INT64_MAX, hi = INT64_MIN, i = 0;
#ifdef __SSE2__ /* two at a time, the same operations: the scalar pass was ~1/4 of the kernel */
    {
        const __m128d sc = _mm_set1_pd(scale), magic = _mm_set1_pd(CB_MAGIC),
                      lim = _mm_set1_pd(2147483647.0), sign = _mm_set1_pd(-0.0);
        __m128d ok = _mm_cmpeq_pd(sc, sc), kmin = _mm_set1_pd(INFINITY), kmax = _mm_set1_pd(-INFINITY);
        for (; i + 2 <= n; i += 2) {
            const __m128d yy = _mm_loadu_pd(y + i), x = _mm_mul_pd(yy, sc);
            const __m128d k = _mm_sub_pd(_mm_add_pd(x, magic), magic);
            ok = _mm_and_pd(ok, _mm_cmplt_pd(_mm_andnot_pd(sign, x), lim)); /* false for NaN */
            ok = _mm_and_pd(ok, _mm_cmpeq_pd(_mm_div_pd(k, sc), yy));
            kmin = _mm_min_pd(kmin, k);
            kmax = _mm_max_pd(kmax, k);
            _mm_storel_epi64((__m128i *)(key + i), _mm_cvttpd_epi32(k));
            if ((i & 8190) == 0 && _mm_movemask_pd(ok) != 3)
                return 1; /* off this grid early (the scan's ms on a µs grid fail whole units at once) */
        }
        if (_mm_movemask_pd(ok) != 3)
            return 1;
        if (i > 0) { /* keys of 32 bits, whole: exact as int64 */
            double two[2];
            _mm_storeu_pd(two, kmin);
            lo = (int64_t)(two[0] < two[1] ? two[0] : two[1]);
            _mm_storeu_pd(two, kmax);
            hi = (int64_t)(two[0] > two[1] ? two[0] : two[1]);
        }
    }
#endif
    for (; i < n; i++) {
        double x = y[i] * scale;
        if (!(fabs(x) < 2147483647.0)) /* keys of 32 bits (NaN: off the grid too) */
            return 1;
        double k = (x + CB_MAGIC) - CB_MAGIC;
        if (k / scale != y[i])
            return 1;
        int32_t ik = (int32_t)k;
        key[i] = ik;
        lo = ik < lo ? ik : lo;
        hi = ik > hi ? ik : hi;
    }
    const int64_t range = (hi - lo < CB_RANGE ? hi - lo : CB_RANGE) + 1;
    const int64_t nwords = ((range >> 6) + 1 + 511) & ~(int64_t)511; /* whole groups of lines */
    cb_counts c;
    c.n = calloc((size_t)range, sizeof(uint16_t));
    uint64_t *bits = calloc((size_t)nwords + 2, sizeof(uint64_t)); /* a word of 0 either side */
    c.bits = bits ? bits + 1 : NULL;
    c.l2 = calloc((size_t)(nwords >> 3), 1);
    c.l3 = calloc((size_t)(nwords >> 9), 1);
    int rc = 0;
    if (!c.n || !bits || !c.l2 || !c.l3) {
        rc = -1;
        goto done;
    }
    if (hi - lo > CB_RANGE) /* rare: the keys from CB_RANGE on made one, so that a key is key[i] - lo */
        for (int64_t j = 0; j < n; j++)
            key[j] = key[j] - lo < CB_RANGE ? key[j] : (int32_t)(lo + CB_RANGE);
    for (int64_t j = -half; j <= half; j++)
        cb_add(&c, key[cb_mirror(j, n)] - lo);
    int64_t m = cb_next(&c, -1), below = 0; /* below: the window's values under key m */
    while (below + c.n[m] <= half) { /* the first median, from the smallest key up */
        below += c.n[m];
        m = cb_next(&c, m);
    }
    /* the window slides in three stretches: its left end mirrored, neither end, its right end
     * mirrored (the keys read without cb_mirror's compares and CB_RANGE's: ~10 % of the kernel) */
    i = 0;
    for (; i < half; i++) {
        if (cb_put(i, m, lo, scale, y, level, resid, absr))
            goto too_far;
        cb_step(&c, half, key[half - i] - lo, key[i + half + 1] - lo, &m, &below);
    }
    for (; i < n - 1 - half; i++) {
        if (cb_put(i, m, lo, scale, y, level, resid, absr))
            goto too_far;
        cb_step(&c, half, key[i - half] - lo, key[i + half + 1] - lo, &m, &below);
    }
    for (; i < n - 1; i++) {
        if (cb_put(i, m, lo, scale, y, level, resid, absr))
            goto too_far;
        cb_step(&c, half, key[i - half] - lo, key[2 * (n - 1) - (i + half + 1)] - lo, &m, &below);
    }
    if (cb_put(n - 1, m, lo, scale, y, level, resid, absr))
        goto too_far;
    goto done;
too_far: /* the median among the values too far above the smallest */
    rc = 2;
done:
    free(c.n); free(bits); free(c.l2); free(c.l3);
    return rc;
}

/* ---- The step search's windows ---------------------------------------------------------------
 *
 * cb_windows(t, n, ws, keys, bounds): t ascending, n ≥ 1. Each echo's window is
 * floor((t[i] - t[0]) / ws) (numpy's expression, evaluated the same way); as t ascends, the
 * windows present are runs of echoes, found by galloping and bisection instead of a division
 * per echo. keys[k] = the k-th window present, bounds[k] its first echo (bounds[nw] = n).
 * Returns nw. (Each window's median is numpy's partition, SIMD on this machine: a scalar
 * quickselect here took 3 × its time.)
 */
static inline int64_t cb_win(const double *t, int64_t i, double ws)
{
    return (int64_t)floor((t[i] - t[0]) / ws);
}

int64_t cb_windows(const double *t, int64_t n, double ws, int64_t *keys, int64_t *bounds)
{
    int64_t nw = 0;
    for (int64_t i = 0; i < n;) {
        const int64_t w = cb_win(t, i, ws);
        int64_t lo = i, step = 1, hi; /* the window's last echo is lo: W(lo) == w < W(hi) or hi = n */
        for (;;) {
            hi = lo + step;
            if (hi >= n) {
                hi = n;
                break;
            }
            if (cb_win(t, hi, ws) != w)
                break;
            lo = hi;
            step *= 2;
        }
        while (hi - lo > 1) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (cb_win(t, mid, ws) != w)
                hi = mid;
            else
                lo = mid;
        }
        keys[nw] = w;
        bounds[nw++] = i;
        i = hi;
    }
    bounds[nw] = n;
    return nw;
}

/* ---- The jitter's quiet residuals ----------------------------------------------------------------
 *
 * cb_quiet(resid, n, cut, base, absbase): the echoes with no |residual| over `cut` at
 * themselves or either neighbour (numpy: ~dilate(absr > cut, 1)), their residuals into base and
 * their |residuals| into absbase, in order, in one pass; returns how many.
 */
int64_t cb_quiet(const double *resid, int64_t n, double cut, double *base, double *absbase)
{
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        const int rough = fabs(resid[i]) > cut || (i > 0 && fabs(resid[i - 1]) > cut)
                          || (i + 1 < n && fabs(resid[i + 1]) > cut);
        base[m] = resid[i];
        absbase[m] = fabs(resid[i]);
        m += !rough;
    }
    return m;
}

/* ---- PELT on the step search's window medians --------------------------------------------------
 *
 * cb_pelt(cs, cs2, n, penalty, min_segment, f, last, cands, fc): levelshift.pelt's recursion, operation for
 * operation (cs, cs2: numpy's cumulative sums of y and y·y with a 0 in front, n + 1 values each):
 * f[t] = min over the candidate starts s ≤ t − min_segment of f[s] + (cs2[t] − cs2[s]) −
 * (cs[t] − cs[s])² / (t − s), plus the penalty; the first minimum wins (numpy's argmin, a NaN
 * first of all); the starts with a cost above f[t] are pruned, t itself joins once a segment can
 * start there. f and last have n + 1 values; cands 2·(n + 1) int64 and fc n + 1 doubles (the
 * candidates and their costs). Python walks `last` back from n.
 */
void cb_pelt(const double *cs, const double *cs2, int64_t n, double penalty, int64_t min_segment,
             double *f, int64_t *last, int64_t *cands, double *fc)
{
    int64_t nc = 1;
    f[0] = -penalty;
    last[0] = 0;
    cands[0] = 0;
    for (int64_t t = 1; t <= n; t++) {
        f[t] = INFINITY;
        last[t] = 0;
        int64_t k = 0; /* the candidates s ≤ t − min_segment: a prefix (ascending) */
        while (k < nc && cands[k] <= t - min_segment)
            k++;
        if (k) {
            int64_t j = 0;
            int nan = 0;
            for (int64_t i = 0; i < k; i++) {
                const int64_t s = cands[i];
                const double seg = cs[t] - cs[s];
                fc[i] = f[s] + ((cs2[t] - cs2[s]) - seg * seg / (double)(t - s));
                if (nan)
                    continue;
                if (isnan(fc[i])) {
                    j = i;
                    nan = 1;
                } else if (fc[i] < fc[j]) {
                    j = i;
                }
            }
            f[t] = fc[j] + penalty;
            last[t] = cands[j];
            int64_t m = 0;
            for (int64_t i = 0; i < k; i++) /* in place: m ≤ i */
                if (fc[i] <= f[t])
                    cands[m++] = cands[i];
            for (int64_t i = k; i < nc; i++)
                cands[m++] = cands[i];
            nc = m;
        }
        if (t <= n - min_segment)
            cands[nc++] = t;
    }
}

/* ---- A pair's echoes as the scan hands them in ------------------------------------------------
 *
 * cb_ordered(t, y, n): 1 when every t and y is finite and t never decreases (numpy: isfinite(t).all()
 * and isfinite(y).all() and not (t[1:] < t[:-1]).any(), three passes and two masks), else 0.
 */
int cb_ordered(const double *t, const double *y, int64_t n)
{
    if (n == 0)
        return 1;
    int ok = (fabs(t[0]) < INFINITY) & (fabs(y[0]) < INFINITY); /* 0 or 1 each; NaN: 0 */
    int64_t i = 1;
#ifdef __SSE2__ /* two at a time (x86-64 has it always): 1.8 ms a 6-hour pair, scalar 6 */
    __m128d acc = _mm_castsi128_pd(_mm_set1_epi32(-1)), zero = _mm_setzero_pd();
    for (; i + 2 <= n; i += 2) {
        const __m128d a = _mm_loadu_pd(t + i), b = _mm_loadu_pd(y + i), p = _mm_loadu_pd(t + i - 1);
        acc = _mm_and_pd(acc, _mm_cmpeq_pd(_mm_sub_pd(a, a), zero)); /* x - x is 0 unless x is NaN or inf */
        acc = _mm_and_pd(acc, _mm_cmpeq_pd(_mm_sub_pd(b, b), zero));
        acc = _mm_and_pd(acc, _mm_cmpge_pd(a, p)); /* false with a NaN */
    }
    ok &= _mm_movemask_pd(acc) == 3;
#endif
    for (; i < n; i++)
        ok &= (fabs(t[i]) < INFINITY) & (fabs(y[i]) < INFINITY) & (t[i] >= t[i - 1]);
    return ok;
}

/* ---- An exact order statistic of a long series -----------------------------------------------------
 *
 * cb_select(x, n, k, two, out, buf, hist): the k-th smallest of x[0..n) (0-based) into out[0] and,
 * when `two`, the (k+1)-th into out[1] (a median of an even count needs both); x is not modified.
 * A radix select on each double's IEEE-754 total-order key (bits u; negative: ~u, else u | 1<<63:
 * the keys order the values as < does, -0.0 just below +0.0): a histogram of the key's top 16 bits
 * in one pass, then only the bucket holding rank k is gathered into buf (n keys, the caller's)
 * with the histogram of its next 16 bits, and so on; a bucket of at most CB_SMALL keys is sorted,
 * one at the last 16 bits holds a single key. When rank k is the largest of its bucket and rank
 * k + 1 lies in the next one, the two are that bucket's max and the next one's min: one pass, no
 * gather. hist: 65536 counts (the caller's). Two or three passes over the series against
 * np.partition's ~24 ms on a 6-hour pair's 2.16 M doubles. Returns 0, or -1 for a rank outside
 * the series (or n >= 2^32: the counts are 32-bit).
 */
#define CB_SMALL 64

static inline uint64_t cb_key(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return (u >> 63) ? ~u : (u | 0x8000000000000000ULL);
}

static inline double cb_unkey(uint64_t key)
{
    const uint64_t u = (key >> 63) ? (key & 0x7FFFFFFFFFFFFFFFULL) : ~key;
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static int64_t cb_bucket_of(const uint32_t *hist, int64_t r, int64_t *before)
{
    int64_t acc = 0, b = 0;
    while (acc + (int64_t)hist[b] <= r)
        acc += hist[b++];
    *before = acc;
    return b;
}

/* ranks r (and r + 1 when two) of the keys sorted, for at most CB_SMALL keys */
static void cb_sorted_pick(uint64_t *keys, int64_t m, int64_t r, int two, double *out)
{
    for (int64_t i = 1; i < m; i++) {
        const uint64_t v = keys[i];
        int64_t j = i;
        for (; j > 0 && keys[j - 1] > v; j--)
            keys[j] = keys[j - 1];
        keys[j] = v;
    }
    out[0] = cb_unkey(keys[r]);
    if (two)
        out[1] = cb_unkey(keys[r + 1]);
}

int cb_select(const double *x, int64_t n, int64_t k, int two, double *out, uint64_t *buf, uint32_t *hist)
{
    if (k < 0 || k >= n || (two && k + 1 >= n) || n >= ((int64_t)1 << 32))
        return -1;
    memset(hist, 0, 65536 * sizeof *hist);
    for (int64_t i = 0; i < n; i++)
        hist[cb_key(x[i]) >> 48]++;
    int shift = 48;
    int64_t m = n; /* the keys left: x's at the first level, then buf[0..m) */
    for (;;) {
        int64_t before;
        const int64_t b = cb_bucket_of(hist, k, &before), r = k - before, c = hist[b];
        if (two && r + 1 == c) { /* k the bucket's largest, k + 1 the next bucket's smallest */
            int64_t b2 = b + 1;
            while (hist[b2] == 0)
                b2++;
            uint64_t hi = 0, lo = UINT64_MAX;
            for (int64_t i = 0; i < m; i++) {
                const uint64_t key = shift == 48 ? cb_key(x[i]) : buf[i];
                const int64_t d = (int64_t)((key >> shift) & 0xFFFF);
                if (d == b && key > hi)
                    hi = key;
                else if (d == b2 && key < lo)
                    lo = key;
            }
            out[0] = cb_unkey(hi);
            out[1] = cb_unkey(lo);
            return 0;
        }
        if (shift == 0) { /* the bucket is one key: the bits above 16 are every key's left */
            const uint64_t key = (buf[0] & ~(uint64_t)0xFFFF) | (uint64_t)b;
            out[0] = cb_unkey(key);
            if (two)
                out[1] = out[0];
            return 0;
        }
        /* gather the bucket (in place in buf: the write never passes the read), counting its next bits */
        const int next = shift - 16;
        int64_t w = 0;
        if (c > CB_SMALL)
            memset(hist, 0, 65536 * sizeof *hist);
        for (int64_t i = 0; i < m; i++) {
            const uint64_t key = shift == 48 ? cb_key(x[i]) : buf[i];
            if ((int64_t)((key >> shift) & 0xFFFF) == b) {
                buf[w++] = key;
                if (c > CB_SMALL)
                    hist[(key >> next) & 0xFFFF]++;
            }
        }
        if (c <= CB_SMALL) {
            cb_sorted_pick(buf, c, r, two, out);
            return 0;
        }
        m = c;
        k = r;
        shift = next;
    }
}

/* ---- The step search's window medians ---------------------------------------------------------------
 *
 * cb_window_medians(y, bounds, nw, med, keys): med[w] = the median of y[bounds[w] .. bounds[w+1])
 * for w < nw (each window non-empty; keys holds the longest window's count), as window_medians'
 * numpy loop gave it: for odd m the middle u, (u + u) / 2; for even m (the lower middle + the
 * upper) / 2. Each window's order statistics by a radix select like cb_select's on the bits
 * from the highest its keys differ in, 11 at a time (2,048 counts: cleared in no time for a
 * window of 3,000), with no data-dependent branch in its passes: a quickselect (or numpy's
 * partition) of 3,000 doubles mispredicts a branch on half its comparisons, ~30 µs a window,
 * ~24 ms for a 6-hour pair's 720 windows.
 */
#define CB_DIGIT 11

static void cb_select_small(const double *x, int64_t n, int64_t k, int two, double *out, uint64_t *keys)
{
    uint32_t hist[1 << CB_DIGIT];
    const uint64_t mask = (1u << CB_DIGIT) - 1;
    uint64_t diff = 0;
    const uint64_t first = cb_key(x[0]);
    for (int64_t i = 0; i < n; i++) {
        keys[i] = cb_key(x[i]);
        diff |= keys[i] ^ first;
    }
    if (diff == 0) { /* one value */
        out[0] = out[1] = x[0];
        return;
    }
    int shift = 63 - __builtin_clzll(diff) + 1 - CB_DIGIT; /* the digit's top: the highest differing bit */
    if (shift < 0)
        shift = 0;
    int64_t m = n;
    for (;;) {
        memset(hist, 0, sizeof hist);
        for (int64_t i = 0; i < m; i++)
            hist[(keys[i] >> shift) & mask]++;
        int64_t before = 0, b = 0;
        while (before + (int64_t)hist[b] <= k)
            before += hist[b++];
        const int64_t r = k - before, c = hist[b];
        if (two && r + 1 == c) { /* k the bucket's largest, k + 1 the next bucket's smallest */
            int64_t b2 = b + 1;
            while (hist[b2] == 0)
                b2++;
            uint64_t hi = 0, lo = UINT64_MAX;
            for (int64_t i = 0; i < m; i++) {
                const uint64_t key = keys[i], d = (key >> shift) & mask;
                hi = d == (uint64_t)b && key > hi ? key : hi;
                lo = d == (uint64_t)b2 && key < lo ? key : lo;
            }
            out[0] = cb_unkey(hi);
            out[1] = cb_unkey(lo);
            return;
        }
        int64_t w = 0;
        for (int64_t i = 0; i < m; i++) { /* the bucket gathered in place (w <= i), without a branch */
            keys[w] = keys[i];
            w += ((keys[i] >> shift) & mask) == (uint64_t)b;
        }
        if (shift == 0 || c <= CB_SMALL) { /* one key at the last bits; else a few, sorted */
            cb_sorted_pick(keys, c, r, two, out);
            return;
        }
        m = c;
        k = r;
        shift = shift > CB_DIGIT ? shift - CB_DIGIT : 0;
    }
}

void cb_window_medians(const double *y, const int64_t *bounds, int64_t nw, double *med, uint64_t *keys)
{
    for (int64_t w = 0; w < nw; w++) {
        const int64_t a = bounds[w], m = bounds[w + 1] - a, h = m / 2;
        double mid[2];
        if (m % 2) {
            cb_select_small(y + a, m, h, 0, mid, keys);
            med[w] = (mid[0] + mid[0]) / 2.0;
        } else {
            cb_select_small(y + a, m, h - 1, 1, mid, keys);
            med[w] = (mid[0] + mid[1]) / 2.0;
        }
    }
}
