/* Bump allocator: everything of one model's IR lives in one arena, freed at once. */
#ifndef TCI_UTIL_ARENA_H
#define TCI_UTIL_ARENA_H

#include <stddef.h>

typedef struct tci_arena tci_arena;

tci_arena *tci_arena_create(void);
void tci_arena_destroy(tci_arena *arena);
/* Zeroed, 16-byte aligned; NULL when out of memory (the arena stays usable). */
void *tci_arena_alloc(tci_arena *arena, size_t size);
/* Copy of s (NULL gives NULL); NULL when out of memory. */
char *tci_arena_strdup(tci_arena *arena, const char *s);
void *tci_arena_memdup(tci_arena *arena, const void *p, size_t size);
/* Total bytes handed out, for reports and tests. */
size_t tci_arena_used(const tci_arena *arena);

#endif
