/* A small JSON document builder for --json and the --profile trace: objects, arrays, numbers,
 * strings, booleans and null, printed as valid JSON (NaN and Inf as null, strings escaped).
 * In the command itself so that tcinfer runs where only the CUDA libraries are installed. */
#ifndef TCI_CLI_JSON_H
#define TCI_CLI_JSON_H

#include <stdbool.h>
#include <stdio.h>

typedef struct json_value json_value;

json_value *json_object(void);
json_value *json_array(void);
json_value *json_number(double v);
json_value *json_string(const char *s); /* NULL: null */
json_value *json_bool(bool v);
json_value *json_null(void);

/* Adds item to object o under key (or to array o when key is NULL) and returns item; o owns
 * it. A NULL o or item is ignored (item is freed). */
json_value *json_add(json_value *o, const char *key, json_value *item);
json_value *json_add_number(json_value *o, const char *key, double v);
json_value *json_add_string(json_value *o, const char *key, const char *s);
json_value *json_add_bool(json_value *o, const char *key, bool v);
json_value *json_add_object(json_value *o, const char *key);
json_value *json_add_array(json_value *o, const char *key);
/* Element i of an array (NULL past its end). */
json_value *json_at(json_value *array, size_t i);

/* Writes item indented, with a final newline; false on a write error. */
bool json_print(const json_value *item, FILE *f);
void json_free(json_value *item);

#endif
