/* Whole files into memory (see file.h). */
#define _XOPEN_SOURCE 700 /* fdopen, O_CLOEXEC */

#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/status.h"

tci_status util_read_file(const char *path, const char *what, unsigned char **out,
                         size_t *out_size) {
    *out = NULL;
    *out_size = 0;
    /* O_NONBLOCK: a FIFO must not block the open; only regular files are read */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return status_error(TCI_ERR_IO, "cannot open %s'%s': %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return status_error(TCI_ERR_IO, "%s'%s' is not a regular file", what, path);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return status_error(TCI_ERR_IO, "cannot open %s'%s': %s", what, path, strerror(errno));
    }
    unsigned char *buf = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory reading %s'%s'", what, path);
            }
            buf = nb;
        }
        size_t n = fread(buf + size, 1, cap - size, f);
        size += n;
        if (n == 0) break;
    }
    bool failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        return status_error(TCI_ERR_IO, "error reading %s'%s'", what, path);
    }
    *out = buf;
    *out_size = size;
    return TCI_OK;
}
