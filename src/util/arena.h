/* Bump allocator: everything of one model's IR lives in one arena, freed at once. */
#ifndef TCI_UTIL_ARENA_H
#define TCI_UTIL_ARENA_H

#include <stddef.h>

typedef struct mem_arena mem_arena;

mem_arena *arena_create(void);
void arena_destroy(mem_arena *arena);
/* Zeroed, 16-byte aligned; NULL when out of memory (the arena stays usable). */
void *arena_alloc(mem_arena *arena, size_t size);
/* Copy of s (NULL gives NULL); NULL when out of memory. */
char *arena_strdup(mem_arena *arena, const char *s);
void *arena_memdup(mem_arena *arena, const void *p, size_t size);
/* Total bytes handed out, for reports and tests. */
size_t arena_used(const mem_arena *arena);

#endif
