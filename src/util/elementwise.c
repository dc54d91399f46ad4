/* The host side of util/elementwise.h: names, fusion flags and the precise fp32 formulas. */
#include "util/elementwise.h"

#include <math.h>
#include <stddef.h>

#define ACT_NAME_ROW(NAME, DISPLAY, FORMULA, FLAGS) [ACT_##NAME] = DISPLAY,
static const char *const act_names[ACT_COUNT] = {ACT_LIST(ACT_NAME_ROW)};
#undef ACT_NAME_ROW

#define ACT_FLAGS_ROW(NAME, DISPLAY, FORMULA, FLAGS) [ACT_##NAME] = (FLAGS),
static const unsigned act_flag_table[ACT_COUNT] = {ACT_LIST(ACT_FLAGS_ROW)};
#undef ACT_FLAGS_ROW

#define BINARY_NAME_ROW(NAME, DISPLAY, FLAGS) [BINARY_##NAME] = DISPLAY,
static const char *const binary_names[BINARY_COUNT] = {BINARY_LIST(BINARY_NAME_ROW)};
#undef BINARY_NAME_ROW

#define BINARY_FLAGS_ROW(NAME, DISPLAY, FLAGS) [BINARY_##NAME] = (FLAGS),
static const unsigned binary_flag_table[BINARY_COUNT] = {BINARY_LIST(BINARY_FLAGS_ROW)};
#undef BINARY_FLAGS_ROW

const char *act_name(act_kind kind) {
    return (unsigned)kind < ACT_COUNT ? act_names[kind] : "?";
}

unsigned act_flags(act_kind kind) { return (unsigned)kind < ACT_COUNT ? act_flag_table[kind] : 0; }

#define EXP_(v) expf(v)
#define LOG_(v) logf(v)
#define RCP_(v) (1.0f / (v))
float act_apply_host(act_kind kind, float x, float alpha, float beta) {
#define ACT_HOST_CASE(NAME, DISPLAY, FORMULA, FLAGS)                                               \
    case ACT_##NAME: return (FORMULA);
    switch (kind) {
        ACT_LIST(ACT_HOST_CASE)
    case ACT_COUNT: break;
    }
#undef ACT_HOST_CASE
    return NAN;
}
#undef EXP_
#undef LOG_
#undef RCP_

const char *binary_name(binary_op op) {
    return (unsigned)op < BINARY_COUNT ? binary_names[op] : "?";
}

unsigned binary_flags(binary_op op) {
    return (unsigned)op < BINARY_COUNT ? binary_flag_table[op] : 0;
}
