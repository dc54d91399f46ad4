/* Activation memory planner: greedy-by-size placement of buffer lifetimes in one arena, with
 * in-place chains merged into one slot first. */
#include "graph/plan/memplan.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/status.h"

/* One slot: an in-place chain (or a lone buffer) placed as a unit. */
typedef struct slot {
    size_t bytes;
    size_t offset;
    int first_step;
    int last_step;
    int head; /* buffer index of the chain's head; orders ties deterministically */
} slot;

static int compare_slots(const void *a, const void *b) {
    const slot *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    /* Among equal sizes, going in time order is what lets a chain of equal buffers alternate
     * between two slots instead of spreading over three. */
    if (x->first_step != y->first_step) return x->first_step < y->first_step ? -1 : 1;
    return (x->head > y->head) - (x->head < y->head);
}

static bool lifetimes_intersect(const slot *a, const slot *b) {
    return a->first_step <= b->last_step && b->first_step <= a->last_step;
}

static tci_status check_arguments(const memplan_buffer *buffers, int count, size_t alignment,
                                  const size_t *offsets, const memplan_totals *totals) {
    if (count < 0) return status_error(TCI_ERR_INVALID_ARGUMENT, "memplan: negative count %d", count);
    if ((count > 0 && (!buffers || !offsets)) || !totals)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "memplan: NULL buffers, offsets or totals");
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "memplan: alignment %zu is not a power of two", alignment);
    for (int i = 0; i < count; i++) {
        const memplan_buffer *b = &buffers[i];
        if (b->first_step < 0 || b->last_step < b->first_step)
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "memplan: buffer %d has invalid lifetime [%d, %d]", i, b->first_step,
                             b->last_step);
        if (b->inplace_of < -1 || b->inplace_of >= count || b->inplace_of == i)
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "memplan: buffer %d has invalid inplace_of %d (count %d)", i,
                             b->inplace_of, count);
    }
    return TCI_OK;
}

/* Rounds every size up to the alignment and sums them, refusing any overflow. The planned
 * arena never exceeds the naive sum, so checking the sum covers every offset too. */
static tci_status align_sizes(const memplan_buffer *buffers, int count, size_t alignment,
                              size_t *aligned, size_t *naive) {
    size_t sum = 0;
    for (int i = 0; i < count; i++) {
        size_t bytes = buffers[i].bytes;
        if (bytes > SIZE_MAX - (alignment - 1))
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "memplan: buffer %d size %zu overflows when aligned to %zu", i, bytes,
                             alignment);
        aligned[i] = (bytes + alignment - 1) & ~(alignment - 1);
        if (aligned[i] > SIZE_MAX - sum)
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "memplan: total size overflows at buffer %d (%zu bytes)", i, bytes);
        sum += aligned[i];
    }
    *naive = sum;
    return TCI_OK;
}

/* Accepts the legal in-place hints, in index order so the lowest index wins a contested parent.
 * parent[i] is the buffer i took over, or -1. */
static void link_inplace(const memplan_buffer *buffers, int count, const size_t *aligned,
                         int *parent, bool *taken) {
    for (int i = 0; i < count; i++) {
        parent[i] = -1;
        taken[i] = false;
    }
    for (int i = 0; i < count; i++) {
        int p = buffers[i].inplace_of;
        if (p < 0 || taken[p] || buffers[p].last_step != buffers[i].first_step ||
            aligned[i] > aligned[p])
            continue;
        /* A chain's members meet only at handovers, unless a middle member lives on one step:
         * then its parent and child are alive together on that step yet would share memory. */
        if (buffers[p].first_step == buffers[p].last_step && parent[p] >= 0) continue;
        if (buffers[i].first_step == buffers[i].last_step && taken[i]) continue;
        /* Buffers living on one single step can hint at each other in a ring; accepting the
         * last link would make a chain without a head. */
        int walk = p;
        while (walk >= 0 && walk != i) walk = parent[walk];
        if (walk == i) continue;
        parent[i] = p;
        taken[p] = true;
    }
}

tci_status memplan_plan(const memplan_buffer *buffers, int count, size_t alignment,
                        size_t *offsets, memplan_totals *totals) {
    TRY_STATUS(check_arguments(buffers, count, alignment, offsets, totals));
    totals->arena_bytes = 0;
    totals->naive_bytes = 0;
    if (count == 0) return TCI_OK;

    size_t n = (size_t)count;
    if (n > SIZE_MAX / sizeof(slot))
        return status_error(TCI_ERR_OUT_OF_MEMORY, "memplan: %d buffers is too many", count);
    size_t *aligned = malloc(n * sizeof *aligned);
    int *parent = malloc(n * sizeof *parent);
    int *head_of = malloc(n * sizeof *head_of);
    int *slot_of = malloc(n * sizeof *slot_of); /* by head index */
    bool *taken = malloc(n * sizeof *taken);
    slot *slots = malloc(n * sizeof *slots);
    slot **placed = malloc(n * sizeof *placed);
    tci_status status = TCI_OK;
    if (!aligned || !parent || !head_of || !slot_of || !taken || !slots || !placed) {
        status = status_error(TCI_ERR_OUT_OF_MEMORY, "memplan: out of memory planning %d buffers",
                           count);
        goto done;
    }
    status = align_sizes(buffers, count, alignment, aligned, &totals->naive_bytes);
    if (status != TCI_OK) goto done;
    link_inplace(buffers, count, aligned, parent, taken);

    /* Each chain head gets a slot; a chain only moves forward in time (a child starts where its
     * parent ends) and only shrinks, so the head has the first step and the largest size. */
    for (int i = 0; i < count; i++) head_of[i] = parent[i] < 0 ? i : -1;
    for (int i = 0; i < count; i++) {
        int walk = i;
        while (head_of[walk] < 0) walk = parent[walk];
        int head = head_of[walk];
        for (walk = i; head_of[walk] < 0; walk = parent[walk]) head_of[walk] = head;
    }
    int num_slots = 0;
    for (int i = 0; i < count; i++) {
        if (head_of[i] != i) continue;
        slots[num_slots++] = (slot){aligned[i], 0, buffers[i].first_step, buffers[i].last_step, i};
    }
    qsort(slots, (size_t)num_slots, sizeof *slots, compare_slots);
    for (int k = 0; k < num_slots; k++) slot_of[slots[k].head] = k;
    for (int i = 0; i < count; i++) {
        slot *s = &slots[slot_of[head_of[i]]];
        if (buffers[i].last_step > s->last_step) s->last_step = buffers[i].last_step;
    }

    /* placed[] stays sorted by offset so each gap scan is one pass. */
    int num_placed = 0;
    size_t arena = 0;
    for (int k = 0; k < num_slots; k++) {
        slot *s = &slots[k];
        if (s->bytes == 0) continue;
        size_t low = 0, best_offset = 0, best_gap = SIZE_MAX;
        bool found = false;
        for (int j = 0; j < num_placed; j++) {
            const slot *p = placed[j];
            if (!lifetimes_intersect(s, p)) continue;
            if (p->offset >= low) {
                size_t gap = p->offset - low;
                if (gap >= s->bytes && gap < best_gap) {
                    best_gap = gap;
                    best_offset = low;
                    found = true;
                }
            }
            if (p->offset + p->bytes > low) low = p->offset + p->bytes;
        }
        s->offset = found ? best_offset : low;
        if (s->bytes > SIZE_MAX - s->offset) {
            status = status_error(TCI_ERR_INTERNAL, "memplan: offset overflow placing buffer %d",
                               s->head);
            goto done;
        }
        if (s->offset + s->bytes > arena) arena = s->offset + s->bytes;
        int at = num_placed;
        while (at > 0 && placed[at - 1]->offset > s->offset) {
            placed[at] = placed[at - 1];
            at--;
        }
        placed[at] = s;
        num_placed++;
    }
    totals->arena_bytes = arena;
    for (int i = 0; i < count; i++) offsets[i] = slots[slot_of[head_of[i]]].offset;

done:
    free(aligned);
    free(parent);
    free(head_of);
    free(slot_of);
    free(taken);
    free(slots);
    free(placed);
    return status;
}

double memplan_ratio(const memplan_totals *totals) {
    if (!totals || totals->naive_bytes == 0) return 1.0;
    return (double)totals->arena_bytes / (double)totals->naive_bytes;
}
