/* Sizes computed at run time from dims, overflow-checked: dims come from inputs and from
 * model files, which are data (a hostile file may give any dims), so a product that
 * overflows int64 (or a negative factor) must be caught before it sizes memory. Each
 * function returns the result, or clears *ok and returns 0. Plain C (the C target and the
 * standalone model use it as the C++ targets do). */
#ifndef FLUIDITY_SIZES_H
#define FLUIDITY_SIZES_H
#include <stdint.h>

static inline int64_t fl_mul_checked(int64_t a, int64_t b, int* ok) {
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) {
        *ok = 0;
        return 0;
    }
    return r;
}

static inline int64_t fl_add_checked(int64_t a, int64_t b, int* ok) {
    int64_t r;
    if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) {
        *ok = 0;
        return 0;
    }
    return r;
}

/* n rounded up to a multiple of `a` (an arena slot's alignment). */
static inline int64_t fl_align_checked(int64_t n, int64_t a, int* ok) {
    return fl_add_checked(n, a - 1, ok) / a * a;
}

#endif
