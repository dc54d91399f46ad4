/* Small pieces of the --report HTML file: text escaped for HTML, numbers that are always finite
 * SVG coordinates, log-scale axes, histograms and the colours of kernel families. */
#ifndef TCI_CLI_REPORT_SVG_H
#define TCI_CLI_REPORT_SVG_H

#include <stddef.h>
#include <stdio.h>

/* s with & < > " ' as character references and control characters other than tab and newline
 * (not allowed in HTML) as U+FFFD; NULL writes nothing. */
void html_escape(FILE *f, const char *s);
/* v as a short decimal ("%.4g") for an attribute; a non-finite v is written as 0. */
const char *svg_num(char buf[32], double v);

/* A log10 axis: the whole decades [lo, hi] covering the finite positive values of v (values
 * below least count as least); [least, least*10] when there are none. */
typedef struct svg_log_axis {
    int lo, hi; /* decade exponents, lo < hi */
} svg_log_axis;
svg_log_axis svg_log_axis_of(const double *v, size_t n, double least);
/* Pixel offset of v on the axis spanning `length` pixels, 0 at 10^lo; v below 10^lo (and 0, NaN)
 * at 0, above 10^hi at length. */
double svg_log_pos(const svg_log_axis *axis, double v, double length);

/* Counts of the finite values of x in `bins` equal bins over [lo, hi] (hi itself in the last);
 * values outside are not counted. Returns the count of values placed. */
size_t hist_fill(const float *x, size_t n, double lo, double hi, unsigned *counts, int bins);
/* The range of the finite values of x and y together into *lo, *hi; 0 when there is none.
 * A single value v gives [v - 0.5, v + 0.5]. */
int hist_range(const float *x, size_t nx, const float *y, size_t ny, double *lo, double *hi);

/* The family of a kernel description ("wmma gemm 128x128x32 ...", "cuDNN convolution ...") as
 * one of: "wgmma", "wmma", "cuDNN", "cuBLASLt", "tcinfer", "other"; and its fill colour. */
const char *kernel_family(const char *kernel);
const char *kernel_family_colour(const char *family);

#endif
