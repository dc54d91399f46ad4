/* Chunked bump allocator; large requests get a chunk of their own. */
#include "util/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} arena_chunk;

struct mem_arena {
    arena_chunk *head;
    size_t total;
};

enum { ARENA_CHUNK = 64 * 1024 };

mem_arena *arena_create(void) { return calloc(1, sizeof(mem_arena)); }

void arena_destroy(mem_arena *arena) {
    if (!arena) return;
    arena_chunk *c = arena->head;
    while (c) {
        arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(arena);
}

void *arena_alloc(mem_arena *arena, size_t size) {
    if (size > SIZE_MAX - 32) return NULL;
    size = (size + 15) & ~(size_t)15;
    if (size == 0) size = 16;
    arena_chunk *c = arena->head;
    if (!c || c->size - c->used < size) {
        size_t cap = size > ARENA_CHUNK / 4 ? size : ARENA_CHUNK;
        arena_chunk *n = malloc(sizeof(arena_chunk) + cap);
        if (!n) return NULL;
        n->size = cap;
        n->used = 0;
        if (c && cap == size) {
            /* keep filling the current chunk; the big block goes behind it */
            n->next = c->next;
            c->next = n;
        } else {
            n->next = c;
            arena->head = n;
        }
        c = n;
    }
    void *p = c->data + c->used;
    c->used += size;
    arena->total += size;
    memset(p, 0, size);
    return p;
}

void *arena_memdup(mem_arena *arena, const void *p, size_t size) {
    void *q = arena_alloc(arena, size);
    if (q && size) memcpy(q, p, size);
    return q;
}

char *arena_strdup(mem_arena *arena, const char *s) {
    if (!s) return NULL;
    return arena_memdup(arena, s, strlen(s) + 1);
}

size_t arena_used(const mem_arena *arena) { return arena->total; }
