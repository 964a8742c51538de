/* MultiSlot text parser: a chunk of whole lines -> flat per-slot value buffers + offsets.
 *
 * A line holds, for every declared slot in order, `<count> <v1> ... <vcount>`. Values of
 * used slots are written to vals[u] (int64 for uint64 slots, float for float slots); after
 * the e-th good line (example e), offs[u * stride + e + 1] is the running number of values
 * of used slot u. Unused slots' values are skipped unchecked. Blank lines (empty, or only
 * spaces) are skipped and counted in state[6], the first one's line kept in state[7].
 * multislot.py compiles this file with `cc -O2 -shared -fPIC` and calls ms_parse through
 * ctypes (which releases the GIL). Its pure-Python fallback follows the same rules, so both
 * give identical batches and identical errors.
 *
 * state: [0] byte position, [1] lines seen (empty ones too), [2] examples written,
 *        [3] lines skipped, [4] used slot that needs more room, [5] values it needs,
 *        [6] blank lines skipped, [7] the first blank line (in the chunk, from 0; -1: none).
 * Returns MS_DONE, MS_NEED_SPACE (state[0] is at the start of the line that did not fit:
 * grow vals[state[4]] and call again) or MS_BAD_LINE (*err says what and where; with
 * MS_SKIP_BAD in flags, bad lines are counted in state[3], the first one described in *err).
 *
 * Values of used slots are checked: a uint64 id must fit an int64 (the tensor it goes to:
 * above 2^63-1 is E_ID_RANGE, a minus sign E_NEGATIVE_ID, never a wrapped id); a float must
 * be finite as a float (nan, inf and 1e39, which overflows float, are E_NONFINITE) unless
 * MS_ALLOW_NONFINITE is in flags. example_line[e] is the line (in the chunk, from 0) of
 * example e, so a batch can name the lines it came from.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { MS_DONE = 0, MS_NEED_SPACE = 1, MS_BAD_LINE = 2 };
enum { E_COUNT_MISSING = 1, E_COUNT_NOT_INT, E_COUNT_NEGATIVE, E_TOO_FEW, E_BAD_VALUE,
       E_EXTRA, E_DENSE_DIM, E_NONFINITE, E_ID_RANGE, E_NEGATIVE_ID };
enum { MS_SKIP_BAD = 1, MS_ALLOW_NONFINITE = 2 };
enum { KIND_UINT64 = 0, KIND_FLOAT = 1 };

typedef struct {
    int64_t line;      /* line index within the chunk, from 0 */
    int64_t slot;      /* slot index in declaration order */
    int64_t code;      /* E_* */
    int64_t tok_start; /* byte offset of the token at fault (the count for E_TOO_FEW) */
    int64_t tok_len;
    int64_t found;     /* values found (E_TOO_FEW), count (E_DENSE_DIM), extra tokens (E_EXTRA) */
    int64_t expected;  /* values expected (E_DENSE_DIM) */
} ms_error;

/* ' ' \t \r \v \f separate tokens ('\n' separates lines) */
static const unsigned char SPACE[256] = {[' '] = 1, ['\t'] = 1, ['\r'] = 1, ['\v'] = 1,
                                         ['\f'] = 1};
#define is_space(c) (SPACE[(unsigned char)(c)])

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

static int all_digits(const char *p, const char *e) {
    if (p == e) return 0;
    for (; p < e; p++)
        if (!is_digit(*p)) return 0;
    return 1;
}

/* a uint64 token from p to the next space or le: *end after it; 0 unless [0-9]+ in range */
static int scan_uint64(const char *p, const char *le, const char **end, uint64_t *out) {
    uint64_t v = 0;
    int ok = p < le;
    for (; p < le && !is_space(*p); p++) {
        unsigned d = (unsigned)(unsigned char)*p - '0';
        if (d > 9 || __builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, d, &v))
            ok = 0;
    }
    *end = p;
    *out = v;
    return ok;
}

static int ieq(const char *p, const char *e, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(e - p) != n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != word[i]) return 0;
    }
    return 1;
}

static int parse_float_strtod(const char *p, const char *e, float *out) {
    char small[128];
    size_t n = (size_t)(e - p);
    char *b = n < sizeof small ? small : malloc(n + 1);
    if (!b) return 0;
    memcpy(b, p, n);
    b[n] = 0;
    char *end;
    double v = strtod(b, &end);
    int ok = end == b + n;
    if (b != small) free(b);
    if (ok) *out = (float)v;
    return ok;
}

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* [+-]? (digits (. digits*)? | . digits) ([eE] [+-]? digits)?  or  [+-]? inf|infinity|nan
 * (any case), rounded to the nearest double as strtod and Python's float() do, then to
 * float. Short decimals take the exact fast path (Clinger): m <= 2^53, |exponent| <= 22. */
static int parse_float(const char *p, const char *e, float *out) {
    const char *s = p;
    int neg = 0;
    if (s < e && (*s == '+' || *s == '-')) neg = *s++ == '-';
    if (s < e && (*s | 0x20) >= 'a' && (*s | 0x20) <= 'z' &&   /* a word: inf, nan? */
        (ieq(s, e, "inf") || ieq(s, e, "infinity") || ieq(s, e, "nan")))
        return parse_float_strtod(p, e, out);
    uint64_t m = 0;
    int sig = 0, nd = 0, exact = 1;
    int64_t e10 = 0;
    for (; s < e && is_digit(*s); s++, nd++) {
        if (m == 0 && *s == '0') continue;
        if (sig < 19) { m = m * 10 + (uint64_t)(*s - '0'); sig++; } else exact = 0;
    }
    if (s < e && *s == '.') {
        for (s++; s < e && is_digit(*s); s++, nd++) {
            if (m == 0 && *s == '0') { e10--; continue; }
            if (sig < 19) { m = m * 10 + (uint64_t)(*s - '0'); sig++; e10--; } else exact = 0;
        }
    }
    if (nd == 0) return 0;
    if (s < e && (*s == 'e' || *s == 'E')) {
        int eneg = 0, ed = 0;
        int64_t x = 0;
        s++;
        if (s < e && (*s == '+' || *s == '-')) eneg = *s++ == '-';
        for (; s < e && is_digit(*s); s++, ed++)
            if (x < 100000) x = x * 10 + (*s - '0');
        if (ed == 0) return 0;
        e10 += eneg ? -x : x;
    }
    if (s != e) return 0;
    if (!exact || m > (1ULL << 53) || e10 < -22 || e10 > 22)
        return parse_float_strtod(p, e, out);
    double v = e10 < 0 ? (double)m / POW10[-e10] : (double)m * POW10[e10];
    *out = (float)(neg ? -v : v);
    return 1;
}

static int bad(ms_error *err, int64_t code, int64_t slot, const char *buf, const char *p,
               const char *t, int64_t found, int64_t expected) {
    err->code = code;
    err->slot = slot;
    err->tok_start = p - buf;
    err->tok_len = t - p;
    err->found = found;
    err->expected = expected;
    return MS_BAD_LINE;
}

/* One non-empty line [p, le). Values go to vals[u] from tent[u] on; tent[u] advances. */
static int parse_line(const char *buf, const char *p, const char *le, int32_t nslots,
                      const int32_t *kind, const int32_t *use, const int64_t *dense_dim,
                      void **vals, const int64_t *cap, int64_t *tent, int64_t *cnts,
                      int allow_nonfinite, ms_error *err, int64_t *state) {
    for (int32_t s = 0; s < nslots; s++) {
        while (p < le && is_space(*p)) p++;
        if (p == le) return bad(err, E_COUNT_MISSING, s, buf, p, p, 0, 0);
        const char *t;
        uint64_t cnt;
        if (!scan_uint64(p, le, &t, &cnt)) {
            if (all_digits(p, t)) {
                cnt = UINT64_MAX; /* an integer, too big: too few values will follow */
            } else {
                int negative = *p == '-' && all_digits(p + 1, t);
                return bad(err, negative ? E_COUNT_NEGATIVE : E_COUNT_NOT_INT, s, buf, p, t, 0,
                           0);
            }
        }
        const char *count_tok = p;
        p = t;
        int32_t u = use[s];
        int write = 0;
        if (u >= 0 && cnt <= (uint64_t)(le - p) / 2) { /* else too few tokens can follow */
            if (tent[u] + (int64_t)cnt > cap[u]) {
                state[4] = u;
                state[5] = tent[u] + (int64_t)cnt;
                return MS_NEED_SPACE;
            }
            write = 1;
        }
        for (uint64_t k = 0; k < cnt; k++) {
            while (p < le && is_space(*p)) p++;
            if (p == le) return bad(err, E_TOO_FEW, s, buf, count_tok, t, (int64_t)k, 0);
            const char *v = p;
            if (u >= 0 && kind[s] == KIND_UINT64) {
                uint64_t id;
                int ok = scan_uint64(v, le, &p, &id);
                if (!ok || id > (uint64_t)INT64_MAX) {
                    while (p < le && !is_space(*p)) p++;
                    int code = all_digits(v, p) ? E_ID_RANGE
                             : *v == '-' && all_digits(v + 1, p) ? E_NEGATIVE_ID : E_BAD_VALUE;
                    return bad(err, code, s, buf, v, p, 0, 0);
                }
                if (write) ((int64_t *)vals[u])[tent[u] + (int64_t)k] = (int64_t)id;
                continue;
            }
            while (p < le && !is_space(*p)) p++;
            if (u >= 0) {
                float f;
                if (!parse_float(v, p, &f)) return bad(err, E_BAD_VALUE, s, buf, v, p, 0, 0);
                if (!allow_nonfinite && !isfinite(f))
                    return bad(err, E_NONFINITE, s, buf, v, p, 0, 0);
                if (write) ((float *)vals[u])[tent[u] + (int64_t)k] = f;
            }
        }
        if (u < 0) continue;
        if (dense_dim[u] > 0 && (int64_t)cnt != dense_dim[u])
            return bad(err, E_DENSE_DIM, s, buf, count_tok, t, (int64_t)cnt, dense_dim[u]);
        tent[u] += (int64_t)cnt;
        cnts[u] = (int64_t)cnt;
    }
    while (p < le && is_space(*p)) p++;
    if (p < le) {
        const char *first = p, *t = p;
        int64_t n = 0;
        while (p < le) {
            while (p < le && !is_space(*p)) p++;
            if (n == 0) t = p;
            n++;
            while (p < le && is_space(*p)) p++;
        }
        return bad(err, E_EXTRA, nslots - 1, buf, first, t, n, 0);
    }
    return MS_DONE;
}

int ms_parse(const char *buf, int64_t len, int64_t *state, int32_t nslots, const int32_t *kind,
             const int32_t *use, int32_t nused, int64_t *dense_dim, void **vals,
             const int64_t *cap, int64_t *offs, int64_t stride, int32_t flags,
             int64_t *example_line, ms_error *err) {
    int skip_bad = flags & MS_SKIP_BAD, allow_nonfinite = (flags & MS_ALLOW_NONFINITE) != 0;
    int64_t pos = state[0], line = state[1], ex = state[2];
    int64_t *tent = malloc(sizeof(int64_t) * (size_t)(2 * nused + 1));
    if (!tent) return -1;
    int64_t *cnts = tent + nused;
    if (ex == 0)
        for (int32_t u = 0; u < nused; u++) offs[u * stride] = 0;
    int rc = MS_DONE;
    while (pos < len) {
        const char *ls = buf + pos;
        const char *nl = memchr(ls, '\n', (size_t)(len - pos));
        const char *le = nl ? nl : buf + len;
        int64_t next = (le - buf) + (nl != NULL);
        const char *p = ls;
        while (p < le && is_space(*p)) p++;
        if (p == le) {
            if (state[6]++ == 0) state[7] = line;
            line++;
            pos = next;
            continue;
        }
        if (ex + 1 >= stride) { state[4] = -1; state[5] = ex + 2; rc = MS_NEED_SPACE; break; }
        for (int32_t u = 0; u < nused; u++) tent[u] = offs[u * stride + ex];
        ms_error e;
        int r = parse_line(buf, p, le, nslots, kind, use, dense_dim, vals, cap, tent, cnts,
                           allow_nonfinite, &e, state);
        if (r == MS_NEED_SPACE) { rc = r; break; }
        if (r == MS_BAD_LINE) {
            e.line = line;
            if (!skip_bad) { *err = e; rc = r; break; }
            if (state[3]++ == 0) *err = e;
        } else {
            for (int32_t u = 0; u < nused; u++) {
                offs[u * stride + ex + 1] = tent[u];
                if (dense_dim[u] < 0) dense_dim[u] = cnts[u];
            }
            example_line[ex] = line;
            ex++;
        }
        line++;
        pos = next;
    }
    free(tent);
    state[0] = pos;
    state[1] = line;
    state[2] = ex;
    return rc;
}
