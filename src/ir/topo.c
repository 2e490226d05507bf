/* Topological sort of a graph's node list (stable Kahn).
 *
 * Edges: a node depends on the producer of every value it reads, and on the producer
 * of every outer value its subgraphs (at any depth) read, when that producer is a node
 * of this graph. Among the nodes whose dependencies are all placed, the one that came
 * first in the old list goes next, so a list that is already in a valid order is left
 * exactly as it was. On a cycle the list is not touched and the diag names a node on
 * the cycle and the path around it. */
#include "ir/ir-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct topo {
    const oq_graph *g;
    size_t n;
    oq_node **nodes;      /* old order */
    uint32_t *index_of;   /* node id -> index + 1 (0: not a node of g) */
    size_t id_cap;
    size_t n_edges, cap_edges;
    size_t *from, *to;    /* edge list: nodes[from] must precede nodes[to] */
    int nomem;
} topo;

static size_t node_index(const topo *t, const oq_node *p)
{
    if (!p || !p->attached || p->graph != t->g || p->id >= t->id_cap)
        return (size_t)-1;
    uint32_t k = t->index_of[p->id];
    return k ? (size_t)k - 1 : (size_t)-1;
}

static void add_edge(topo *t, const oq_value *v, size_t consumer)
{
    if (!v || v->kind != OQ_VALUE_NODE)
        return;
    size_t p = node_index(t, v->producer);
    if (p == (size_t)-1)
        return;
    if (t->n_edges == t->cap_edges) {
        size_t nc = t->cap_edges ? t->cap_edges * 2 : 64;
        size_t *nf = realloc(t->from, nc * sizeof(size_t));
        if (!nf) {
            t->nomem = 1;
            return;
        }
        t->from = nf;
        size_t *nt = realloc(t->to, nc * sizeof(size_t));
        if (!nt) {
            t->nomem = 1;
            return;
        }
        t->to = nt;
        t->cap_edges = nc;
    }
    t->from[t->n_edges] = p;
    t->to[t->n_edges] = consumer;
    t->n_edges++;
}

/* Outer values read anywhere inside subgraph sg (nested subgraphs included). */
static void add_captures(topo *t, const oq_graph *sg, size_t consumer, int depth)
{
    if (depth > 200)
        return; /* the reader refuses deeper nesting; do not recurse forever on a bad IR */
    for (const oq_node *m = sg->first; m; m = m->next) {
        for (size_t k = 0; k < m->n_inputs; k++)
            add_edge(t, m->inputs[k], consumer);
        oq_graph *subs[16];
        size_t ns = oq_node_subgraphs(m, subs, 16);
        for (size_t s = 0; s < ns; s++) {
            if (s < 16) {
                add_captures(t, subs[s], consumer, depth + 1);
            } else {
                /* more than 16 subgraphs on one node: fetch them one by one */
                size_t seen = 0;
                for (size_t a = 0; a < m->n_attrs; a++) {
                    const oq_attr *at = m->attrs[a];
                    if (at->g && seen++ == s)
                        add_captures(t, at->g, consumer, depth + 1);
                    for (size_t j = 0; j < at->n_graphs; j++)
                        if (seen++ == s)
                            add_captures(t, at->graphs[j], consumer, depth + 1);
                }
            }
        }
    }
    for (size_t i = 0; i < sg->n_outputs; i++)
        add_edge(t, sg->outputs[i]->value, consumer);
}

/* Min-heap of node indices: the earliest ready node in the old order comes out first. */
static void heap_push(size_t *h, size_t *len, size_t x)
{
    size_t i = (*len)++;
    h[i] = x;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= h[i])
            break;
        size_t tmp = h[p];
        h[p] = h[i];
        h[i] = tmp;
        i = p;
    }
}

static size_t heap_pop(size_t *h, size_t *len)
{
    size_t top = h[0];
    h[0] = h[--(*len)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, s = i;
        if (l < *len && h[l] < h[s])
            s = l;
        if (r < *len && h[r] < h[s])
            s = r;
        if (s == i)
            break;
        size_t tmp = h[s];
        h[s] = h[i];
        h[i] = tmp;
        i = s;
    }
    return top;
}

static void report_cycle(const topo *t, const size_t *pred_start, const size_t *pred,
                         const size_t *indeg, oq_diag *d)
{
    /* Start from any node left over and keep stepping to an unplaced predecessor:
     * after n steps we are on a cycle. Then walk it once more to print it. */
    size_t x = (size_t)-1;
    for (size_t i = 0; i < t->n; i++)
        if (indeg[i]) {
            x = i;
            break;
        }
    if (x == (size_t)-1)
        return;
    for (size_t step = 0; step < t->n; step++) {
        size_t next = (size_t)-1;
        for (size_t e = pred_start[x]; e < pred_start[x + 1]; e++)
            if (indeg[pred[e]]) {
                next = pred[e];
                break;
            }
        if (next == (size_t)-1)
            break; /* cannot happen: a leftover node has an unplaced predecessor */
        x = next;
    }
    /* x is on a cycle; collect it following predecessors, then print it forward */
    char path[768] = "";
    size_t cyc[8];
    size_t len = 0, total = 0;
    size_t y = x;
    do {
        if (len < 8)
            cyc[len++] = y;
        total++;
        size_t next = x;
        for (size_t e = pred_start[y]; e < pred_start[y + 1]; e++)
            if (indeg[pred[e]]) {
                next = pred[e];
                break;
            }
        y = next;
    } while (y != x && total <= t->n);
    char lbl[64];
    size_t used = 0;
    /* predecessors were collected backwards: print from the end to get data-flow order */
    for (size_t i = len; i-- > 0;) {
        const char *nm = oq_node_label(t->nodes[cyc[i]], lbl, sizeof lbl);
        int k = snprintf(path + used, sizeof path - used, "\"%s\" -> ", nm);
        if (k < 0 || (size_t)k >= sizeof path - used)
            break;
        used += (size_t)k;
    }
    if (total > len && used + 8 < sizeof path) {
        memcpy(path + used, "... -> ", 8);
        used += 7;
    }
    snprintf(path + used, sizeof path - used, "\"%s\"",
             oq_node_label(t->nodes[cyc[len - 1]], lbl, sizeof lbl));
    const oq_node *on = t->nodes[x];
    oq_diag_add(d, OQ_SEV_ERROR, OQ_ERR_INVALID, NULL, oq_node_label(on, lbl, sizeof lbl),
                on->op_type, "graph%s%s%s has a cycle: %s (%zu node%s on the cycle)",
                t->g->name ? " \"" : "", t->g->name ? t->g->name : "", t->g->name ? "\"" : "",
                path, total, total == 1 ? "" : "s");
}

oq_status oq_graph_toposort(oq_graph *g, oq_diag *d)
{
    topo t;
    memset(&t, 0, sizeof t);
    t.g = g;
    oq_status st = OQ_OK;
    size_t *indeg = NULL, *succ_start = NULL, *succ = NULL, *pred_start = NULL, *pred = NULL;
    size_t *heap = NULL, *order = NULL;

    for (oq_node *p = g->first; p; p = p->next)
        t.n++;
    if (t.n < 2)
        return OQ_OK;
    t.nodes = malloc(t.n * sizeof(oq_node *));
    t.id_cap = (size_t)g->model->next_id + 1;
    t.index_of = calloc(t.id_cap, sizeof(uint32_t));
    if (!t.nodes || !t.index_of || t.n >= UINT32_MAX)
        goto nomem;
    size_t i = 0;
    for (oq_node *p = g->first; p; p = p->next, i++) {
        t.nodes[i] = p;
        if (p->id < t.id_cap)
            t.index_of[p->id] = (uint32_t)(i + 1);
    }
    for (i = 0; i < t.n; i++) {
        const oq_node *p = t.nodes[i];
        for (size_t k = 0; k < p->n_inputs; k++)
            add_edge(&t, p->inputs[k], i);
        for (size_t a = 0; a < p->n_attrs; a++) {
            const oq_attr *at = p->attrs[a];
            if (at->g)
                add_captures(&t, at->g, i, 1);
            for (size_t j = 0; j < at->n_graphs; j++)
                add_captures(&t, at->graphs[j], i, 1);
        }
    }
    if (t.nomem)
        goto nomem;

    /* CSR adjacency both ways */
    indeg = calloc(t.n, sizeof(size_t));
    succ_start = calloc(t.n + 1, sizeof(size_t));
    pred_start = calloc(t.n + 1, sizeof(size_t));
    succ = malloc((t.n_edges ? t.n_edges : 1) * sizeof(size_t));
    pred = malloc((t.n_edges ? t.n_edges : 1) * sizeof(size_t));
    heap = malloc(t.n * sizeof(size_t));
    order = malloc(t.n * sizeof(size_t));
    if (!indeg || !succ_start || !pred_start || !succ || !pred || !heap || !order)
        goto nomem;
    for (size_t e = 0; e < t.n_edges; e++) {
        succ_start[t.from[e] + 1]++;
        pred_start[t.to[e] + 1]++;
        indeg[t.to[e]]++;
    }
    for (i = 0; i < t.n; i++) {
        succ_start[i + 1] += succ_start[i];
        pred_start[i + 1] += pred_start[i];
    }
    {
        size_t *sfill = heap, *pfill = order; /* reuse as cursors before the sort starts */
        memcpy(sfill, succ_start, t.n * sizeof(size_t));
        memcpy(pfill, pred_start, t.n * sizeof(size_t));
        for (size_t e = 0; e < t.n_edges; e++) {
            succ[sfill[t.from[e]]++] = t.to[e];
            pred[pfill[t.to[e]]++] = t.from[e];
        }
    }

    size_t hlen = 0, placed = 0;
    for (i = 0; i < t.n; i++)
        if (indeg[i] == 0)
            heap_push(heap, &hlen, i);
    while (hlen) {
        size_t x = heap_pop(heap, &hlen);
        order[placed++] = x;
        for (size_t e = succ_start[x]; e < succ_start[x + 1]; e++)
            if (--indeg[succ[e]] == 0)
                heap_push(heap, &hlen, succ[e]);
    }
    if (placed < t.n) {
        report_cycle(&t, pred_start, pred, indeg, d);
        st = OQ_ERR_INVALID;
        goto done;
    }
    /* relink in the new order */
    for (i = 0; i < t.n; i++) {
        oq_node *p = t.nodes[order[i]];
        p->prev = i ? t.nodes[order[i - 1]] : NULL;
        p->next = i + 1 < t.n ? t.nodes[order[i + 1]] : NULL;
    }
    g->first = t.nodes[order[0]];
    g->last = t.nodes[order[t.n - 1]];
    goto done;
nomem:
    st = oq_diag_error(d, OQ_ERR_NOMEM, "out of memory sorting %zu nodes", t.n);
done:
    free(t.nodes);
    free(t.index_of);
    free(t.from);
    free(t.to);
    free(indeg);
    free(succ_start);
    free(succ);
    free(pred_start);
    free(pred);
    free(heap);
    free(order);
    return st;
}
