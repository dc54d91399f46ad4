/* Strided views through movement ops (view.h). */
#include "graph/passes/view.h"

#include <string.h>

/* Dim d with its size-1 sub-dims dropped and each run of sub-dims that is one stride merged. */
static void canonical(view *v, int d) {
    int64_t nd[VIEW_MAX_SUB], ns[VIEW_MAX_SUB];
    int n = 0;
    for (int j = 0; j < v->num_sub[d]; j++) {
        if (v->sub_dims[d][j] == 1) continue;
        if (n && ns[n - 1] == v->sub_dims[d][j] * v->sub_strides[d][j]) {
            nd[n - 1] *= v->sub_dims[d][j];
            ns[n - 1] = v->sub_strides[d][j];
        } else {
            nd[n] = v->sub_dims[d][j];
            ns[n] = v->sub_strides[d][j];
            n++;
        }
    }
    if (!n) { /* a dim of size 1 (or 0): any stride reads its one element */
        nd[0] = v->dims[d];
        ns[0] = 0;
        n = 1;
    }
    v->num_sub[d] = n;
    memcpy(v->sub_dims[d], nd, sizeof nd[0] * (size_t)n);
    memcpy(v->sub_strides[d], ns, sizeof ns[0] * (size_t)n);
}

void view_dense(view *v, int rank, const int64_t *dims) {
    memset(v, 0, sizeof *v);
    v->rank = rank;
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        v->dims[d] = dims[d];
        v->num_sub[d] = 1;
        v->sub_dims[d][0] = dims[d];
        v->sub_strides[d][0] = s;
        s *= dims[d];
        canonical(v, d);
    }
}

bool view_plain(const view *v) {
    for (int d = 0; d < v->rank; d++)
        if (v->num_sub[d] != 1) return false;
    return true;
}

int64_t view_stride(const view *v, int d) {
    return v->sub_strides[d][v->num_sub[d] - 1];
}

bool view_reshape(view *v, int rank, const int64_t *dims) {
    if (rank < 1 || rank > TCI_MAX_RANK || v->rank < 1) return false;
    int64_t n_old = 1, n_new = 1;
    for (int d = 0; d < v->rank; d++) n_old *= v->dims[d];
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0) return false;
        n_new *= dims[d];
    }
    if (n_old != n_new || n_old < 1) return false;
    /* every sub-dim of size above 1, outermost first */
    int64_t fd[TCI_MAX_RANK * VIEW_MAX_SUB], fs[TCI_MAX_RANK * VIEW_MAX_SUB];
    int nf = 0;
    for (int d = 0; d < v->rank; d++)
        for (int j = 0; j < v->num_sub[d]; j++)
            if (v->sub_dims[d][j] > 1) {
                fd[nf] = v->sub_dims[d][j];
                fs[nf++] = v->sub_strides[d][j];
            }
    view w;
    memset(&w, 0, sizeof w);
    w.rank = rank;
    w.offset = v->offset;
    int f = 0;
    for (int d = 0; d < rank; d++) {
        w.dims[d] = dims[d];
        int64_t need = dims[d];
        int n = 0;
        while (need > 1) {
            if (f == nf || n == VIEW_MAX_SUB) return false;
            if (need % fd[f] == 0) { /* the whole sub-dim */
                w.sub_dims[d][n] = fd[f];
                w.sub_strides[d][n++] = fs[f];
                need /= fd[f++];
            } else if (fd[f] % need == 0) { /* its outer part; the rest stays for the next */
                w.sub_dims[d][n] = need;
                w.sub_strides[d][n++] = fs[f] * (fd[f] / need);
                fd[f] /= need;
                need = 1;
            } else {
                return false;
            }
        }
        w.num_sub[d] = n;
        canonical(&w, d);
    }
    if (f != nf) return false;
    *v = w;
    return true;
}

void view_permute(view *v, const int *perm, bool inverse) {
    view w = *v;
    for (int d = 0; d < v->rank; d++) {
        int to = inverse ? perm[d] : d, from = inverse ? d : perm[d];
        w.dims[to] = v->dims[from];
        w.num_sub[to] = v->num_sub[from];
        memcpy(w.sub_dims[to], v->sub_dims[from], sizeof v->sub_dims[from]);
        memcpy(w.sub_strides[to], v->sub_strides[from], sizeof v->sub_strides[from]);
    }
    *v = w;
}

bool view_select(view *v, const int64_t *start, const int64_t *step, const int64_t *len,
                 int drop) {
    for (int d = 0; d < v->rank; d++) {
        if (start[d] == 0 && step[d] == 1 && len[d] == v->dims[d]) continue; /* untouched */
        if (step[d] < 1 || start[d] < 0 || len[d] < 0 ||
            (len[d] > 0 && start[d] + step[d] * (len[d] - 1) >= v->dims[d]))
            return false;
        if (v->num_sub[d] != 1) return false;
        const int64_t s = v->sub_strides[d][0];
        v->offset += start[d] * s;
        v->dims[d] = v->sub_dims[d][0] = len[d];
        v->sub_strides[d][0] = s * step[d];
        canonical(v, d);
    }
    if (drop >= 0) {
        if (drop >= v->rank || v->dims[drop] != 1) return false;
        view w = *v;
        w.rank = v->rank - 1;
        for (int d = drop; d < w.rank; d++) {
            w.dims[d] = v->dims[d + 1];
            w.num_sub[d] = v->num_sub[d + 1];
            memcpy(w.sub_dims[d], v->sub_dims[d + 1], sizeof v->sub_dims[d]);
            memcpy(w.sub_strides[d], v->sub_strides[d + 1], sizeof v->sub_strides[d]);
        }
        *v = w;
    }
    return true;
}
