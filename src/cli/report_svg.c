/* The --report HTML file's small helpers (report_svg.h). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cli/report_svg.h"

void html_escape(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default:
            if ((*p < 0x20 && *p != '\t' && *p != '\n') || *p == 0x7f) fputs("&#xFFFD;", f);
            else fputc(*p, f);
        }
    }
}

const char *svg_num(char buf[32], double v) {
    snprintf(buf, 32, "%.4g", isfinite(v) ? v : 0.0);
    return buf;
}

svg_log_axis svg_log_axis_of(const double *v, size_t n, double least) {
    double mn = INFINITY, mx = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i]) || v[i] <= 0) continue;
        double x = v[i] < least ? least : v[i];
        if (x < mn) mn = x;
        if (x > mx) mx = x;
    }
    if (!(mn <= mx)) mn = mx = least;
    svg_log_axis a = {(int)floor(log10(mn)), (int)ceil(log10(mx))};
    if (a.hi <= a.lo) a.hi = a.lo + 1;
    return a;
}

double svg_log_pos(const svg_log_axis *axis, double v, double length) {
    if (!(v > 0)) return 0;
    double t = (log10(v) - axis->lo) / (axis->hi - axis->lo);
    if (!(t > 0)) t = 0; /* also NaN */
    if (t > 1) t = 1;
    return t * length;
}

size_t hist_fill(const float *x, size_t n, double lo, double hi, unsigned *counts, int bins) {
    size_t placed = 0;
    memset(counts, 0, (size_t)bins * sizeof *counts);
    if (bins < 1 || !(hi > lo)) return 0;
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        if (!isfinite(v) || v < lo || v > hi) continue;
        int b = (int)((v - lo) / (hi - lo) * bins);
        counts[b >= bins ? bins - 1 : b < 0 ? 0 : b]++;
        placed++;
    }
    return placed;
}

int hist_range(const float *x, size_t nx, const float *y, size_t ny, double *lo, double *hi) {
    double mn = INFINITY, mx = -INFINITY;
    for (int k = 0; k < 2; k++) {
        const float *p = k ? y : x;
        size_t n = k ? ny : nx;
        for (size_t i = 0; p && i < n; i++) {
            if (!isfinite(p[i])) continue;
            if (p[i] < mn) mn = p[i];
            if (p[i] > mx) mx = p[i];
        }
    }
    if (!(mn <= mx)) return 0;
    if (mn == mx) {
        mn -= 0.5;
        mx += 0.5;
    }
    *lo = mn;
    *hi = mx;
    return 1;
}

/* Whether word occurs in the first len bytes of s, ignoring case. */
static int has(const char *s, size_t len, const char *word) {
    size_t n = strlen(word);
    for (size_t i = 0; s && i + n <= len; i++)
        if (strncasecmp(s + i, word, n) == 0) return 1;
    return 0;
}

const char *kernel_family(const char *kernel) {
    /* only the kernel's own name: the note in parentheses after it names the candidates it
     * beat ("... (5.6 us; best tcinfer kernel 6.8 us)"); cuDNN's are its algorithm names */
    size_t len = kernel ? strcspn(kernel, "(") : 0;
    return has(kernel, len, "wgmma")     ? "wgmma"
           : has(kernel, len, "wmma")    ? "wmma"
           : has(kernel, len, "cudnn")   ? "cuDNN"
           : has(kernel, len, "cublas")  ? "cuBLASLt"
           : has(kernel, len, "tcinfer") ? "tcinfer"
           : has(kernel, len, "GEMM") || has(kernel, len, "WINOGRAD") ||
                   has(kernel, len, "FFT") || has(kernel, len, "DIRECT")
               ? "cuDNN"
               : "other";
}

const char *kernel_family_colour(const char *family) {
    static const char *const colours[][2] = {
        {"wgmma", "#1b7837"}, {"wmma", "#5aae61"}, {"cuDNN", "#2166ac"},
        {"cuBLASLt", "#67a9cf"}, {"tcinfer", "#e08214"},
    };
    for (size_t i = 0; i < sizeof colours / sizeof colours[0]; i++)
        if (strcmp(family, colours[i][0]) == 0) return colours[i][1];
    return "#8c8c8c";
}
