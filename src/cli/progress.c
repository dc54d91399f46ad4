/* The progress line of long work (engine builds through the library's tci_progress_fn, and
 * --bench): on a terminal one stderr line rewritten in place and cleared when its stage ends;
 * elsewhere (a pipe, a log file) a plain line at each quarter of a stage of several steps. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

double cli_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void cli_progress_init(cli_progress *p, bool enabled) {
    memset(p, 0, sizeof *p);
    p->enabled = enabled;
    p->tty = enabled && isatty(fileno(stderr));
}

void cli_progress_update(const char *stage, size_t done, size_t total, void *user) {
    cli_progress *p = user;
    if (!p || !p->enabled || !stage) return;
    double t = cli_now_s();
    if (done == 0 || strcmp(stage, p->stage) != 0) {
        snprintf(p->stage, sizeof p->stage, "%s", stage);
        p->start = p->last_draw = t;
        p->quarter = 0;
        p->drawn = false;
    }
    if (p->tty) {
        /* at most ten redraws a second; the stage's end clears the line */
        if (done == total) {
            if (p->drawn) fputs("\r\033[K", stderr);
            p->drawn = false;
        } else if (!p->drawn || t - p->last_draw >= 0.1) {
            fprintf(stderr, "\r\033[Ktcinfer: %s: %zu/%zu (%d%%, %.1f s)", stage, done, total,
                    total ? (int)(100 * done / total) : 100, t - p->start);
            p->drawn = true;
            p->last_draw = t;
        }
    } else if (total > 1 && done > 0) {
        int quarter = (int)(4 * done / total);
        if (quarter > p->quarter) {
            p->quarter = quarter;
            if (done == total)
                fprintf(stderr, "tcinfer: %s: %zu/%zu (%.1f s)\n", stage, done, total,
                        t - p->start);
            else
                fprintf(stderr, "tcinfer: %s: %zu/%zu\n", stage, done, total);
        }
    }
    fflush(stderr);
}

void cli_progress_end(cli_progress *p) {
    if (p && p->tty && p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    if (p) p->drawn = false;
}
