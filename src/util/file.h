/* Whole files into memory. */
#ifndef TCI_UTIL_FILE_H
#define TCI_UTIL_FILE_H

#include <stddef.h>

#include "tcinfer.h"

/* Reads all of path into a malloc'd buffer (*out; free it). Errors name the file, after what
 * (e.g. "the engine file ", or "" for none): "cannot open WHAT'PATH': REASON". */
tci_status util_read_file(const char *path, const char *what, unsigned char **out,
                         size_t *out_size);

#endif
