/* The JSON document builder of json.h. */
#define _POSIX_C_SOURCE 200809L
#include "cli/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum json_kind { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_kind;

struct json_value {
    json_kind kind;
    double number;
    bool boolean;
    char *string;          /* JSON_STRING */
    char *key;             /* the member's name in its object */
    json_value *first, *last;    /* JSON_ARRAY, JSON_OBJECT: the elements */
    json_value *next;
};

static json_value *make(json_kind kind) {
    json_value *j = calloc(1, sizeof *j);
    if (j) j->kind = kind;
    return j;
}

json_value *json_object(void) { return make(JSON_OBJECT); }
json_value *json_array(void) { return make(JSON_ARRAY); }
json_value *json_null(void) { return make(JSON_NULL); }

json_value *json_number(double v) {
    json_value *j = make(JSON_NUMBER);
    if (j) j->number = v;
    return j;
}

json_value *json_bool(bool v) {
    json_value *j = make(JSON_BOOL);
    if (j) j->boolean = v;
    return j;
}

json_value *json_string(const char *s) {
    if (!s) return json_null();
    json_value *j = make(JSON_STRING);
    if (j && !(j->string = strdup(s))) {
        free(j);
        return NULL;
    }
    return j;
}

json_value *json_add(json_value *o, const char *key, json_value *item) {
    if (!o || !item || (o->kind != JSON_OBJECT && o->kind != JSON_ARRAY) ||
        (o->kind == JSON_OBJECT && !key)) {
        json_free(item);
        return NULL;
    }
    if (key && !(item->key = strdup(key))) {
        json_free(item);
        return NULL;
    }
    if (o->last) o->last->next = item;
    else o->first = item;
    o->last = item;
    return item;
}

json_value *json_add_number(json_value *o, const char *key, double v) { return json_add(o, key, json_number(v)); }
json_value *json_add_string(json_value *o, const char *key, const char *s) { return json_add(o, key, json_string(s)); }
json_value *json_add_bool(json_value *o, const char *key, bool v) { return json_add(o, key, json_bool(v)); }
json_value *json_add_object(json_value *o, const char *key) { return json_add(o, key, json_object()); }
json_value *json_add_array(json_value *o, const char *key) { return json_add(o, key, json_array()); }

json_value *json_at(json_value *array, size_t i) {
    json_value *j = array && array->kind == JSON_ARRAY ? array->first : NULL;
    while (j && i--) j = j->next;
    return j;
}

static void print_string(const char *s, FILE *f) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        switch (*c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*c < 0x20) fprintf(f, "\\u%04x", *c);
            else fputc(*c, f);
        }
    }
    fputc('"', f);
}

static void print_item(const json_value *j, int depth, FILE *f) {
    switch (j->kind) {
    case JSON_NULL: fputs("null", f); return;
    case JSON_BOOL: fputs(j->boolean ? "true" : "false", f); return;
    case JSON_NUMBER:
        if (!isfinite(j->number)) fputs("null", f);
        else if (j->number == floor(j->number) && fabs(j->number) < 1e15)
            fprintf(f, "%.0f", j->number);
        else
            fprintf(f, "%.9g", j->number);
        return;
    case JSON_STRING: print_string(j->string, f); return;
    case JSON_ARRAY:
    case JSON_OBJECT: {
        bool object = j->kind == JSON_OBJECT;
        /* arrays of numbers, strings and the like (shapes) on one line */
        bool flat = !object;
        for (const json_value *e = j->first; e && flat; e = e->next)
            flat = e->kind != JSON_ARRAY && e->kind != JSON_OBJECT;
        fputc(object ? '{' : '[', f);
        for (const json_value *e = j->first; e; e = e->next) {
            if (flat) fputs(e == j->first ? "" : " ", f);
            else fprintf(f, "\n%*s", 2 * (depth + 1), "");
            if (object) {
                print_string(e->key, f);
                fputs(": ", f);
            }
            print_item(e, depth + 1, f);
            if (e->next) fputc(',', f);
        }
        if (j->first && !flat) fprintf(f, "\n%*s", 2 * depth, "");
        fputc(object ? '}' : ']', f);
        return;
    }
    }
}

bool json_print(const json_value *item, FILE *f) {
    if (!item) return false;
    print_item(item, 0, f);
    fputc('\n', f);
    return !ferror(f);
}

void json_free(json_value *item) {
    while (item) {
        json_value *next = item->next;
        json_free(item->first);
        free(item->string);
        free(item->key);
        free(item);
        item = next;
    }
}
