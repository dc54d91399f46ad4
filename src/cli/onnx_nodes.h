/* The node list of an ONNX file as written (names, op types, inputs, first outputs) and its graph's
 * output names, read from the protobuf wire format for the --report layer table: the engine
 * runs an optimised graph, and the report names every node of the model, folded or not. */
#ifndef TCI_CLI_ONNX_NODES_H
#define TCI_CLI_ONNX_NODES_H

#include <stddef.h>

typedef struct cli_onnx_node {
    char *name;    /* "" when the file gives none */
    char *op_type;
    char *output;  /* the node's first output ("" when none) */
    char **inputs; /* its inputs ("" for an omitted optional one) */
    size_t num_inputs;
} cli_onnx_node;

typedef struct cli_onnx_graph {
    cli_onnx_node *nodes; /* the top-level graph's nodes in file order */
    size_t num_nodes;
    char **outputs;       /* the graph's output names */
    size_t num_outputs;
} cli_onnx_graph;

/* Reads bytes[0..size) as a ModelProto. 0, or -1 with a reason in err (malformed wire format,
 * out of memory); the caller frees g with cli_onnx_graph_free either way. */
int cli_onnx_graph_parse(const unsigned char *bytes, size_t size, cli_onnx_graph *g, char *err,
                         size_t err_size);
/* The same from a file. */
int cli_onnx_graph_read(const char *path, cli_onnx_graph *g, char *err, size_t err_size);
void cli_onnx_graph_free(cli_onnx_graph *g);

#endif
