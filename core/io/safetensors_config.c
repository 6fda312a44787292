/* The model config as the JSON object a safetensors file carries under "roper.config"
 * (core/io/safetensors.h): rp.model's keys and names, so that a Python reader sees what a Lua user
 * writes, and numbers that read back exactly (the shortest "%.*g" that strtod maps back). The
 * keys, their order and when each is written are the config schema's (model_schema.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "model_schema.h"
#include "safetensors.h"

/* The shortest %.{15,16,17}g form of x that reads back as x. */
static const char *num_str(char *buf, size_t n, double x)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}

/* 1 when roper.config holds row k of c (its rp_cfg_json). */
static int written(const rp_model_cfg *c, const rp_cfg_key *k)
{
    char why[256];
    switch (k->json) {
    case RP_CFG_JSON_REQUIRED:
    case RP_CFG_JSON_ALWAYS: return 1;
    case RP_CFG_JSON_APPLIES: return rp_model_cfg_unused(c, k, why, sizeof why) == NULL;
    default: return !rp_model_cfg_is_default(c, k);
    }
}

size_t rp_model_cfg_to_json(const rp_model_cfg *c, char *buf, size_t n)
{
    if (rp_model_cfg_check_keys(c) != RP_OK) return 0; /* never JSON the reader refuses */
    size_t k = 0;
    if (n) buf[0] = '\0';
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *key = &rp_model_cfg_keys[i];
        if (!written(c, key)) continue;
        char val[64];
        int64_t v = rp_model_cfg_get_int(c, key);
        switch (key->type) {
        case RP_CFG_INT: snprintf(val, sizeof val, "%lld", (long long)v); break;
        case RP_CFG_NUM: num_str(val, sizeof val, rp_model_cfg_get_num(c, key)); break;
        case RP_CFG_SEED: snprintf(val, sizeof val, "%llu", (unsigned long long)(uint64_t)v); break;
        case RP_CFG_BOOL: snprintf(val, sizeof val, "%s", v ? "true" : "false"); break;
        default: { /* the name, quoted */
            char name[48];
            snprintf(val, sizeof val, "\"%s\"", rp_model_cfg_value_str(c, key, name, sizeof name));
        }
        }
        int w = snprintf(buf + (k < n ? k : n), k < n ? n - k : 0, "%c\"%s\":%s", k ? ',' : '{',
                         key->name, val);
        if (w < 0) return 0;
        k += (size_t)w;
    }
    int w = snprintf(buf + (k < n ? k : n), k < n ? n - k : 0, "}");
    return w < 0 ? 0 : k + (size_t)w;
}

/* RP_ERR_ARG: read_key's message for the value at node x of another type than row k's (or a
 * string that names no value of it): got is the value's rp_json_type_name, or a string as
 * rp_json_quoted shows it in RP_JSON_VALUE_TEXT bytes for a rotate or enum row. */
static rp_status bad_value(const rp_json_doc *doc, const rp_json_node *x, const rp_cfg_key *k)
{
    char got[RP_JSON_VALUE_TEXT + 8], list[160] = "";
    if (x->type == RP_JSON_STRING && (k->type == RP_CFG_ROTATE || k->type == RP_CFG_ENUM))
        rp_json_quoted(got, sizeof got, doc->strings + x->str, x->str_len, RP_JSON_VALUE_TEXT);
    else
        snprintf(got, sizeof got, "%s", rp_json_type_name(x->type));
    switch (k->type) {
    case RP_CFG_NUM: return rp_error(RP_ERR_ARG, "'%s' must be a number, got %s", k->name, got);
    case RP_CFG_ENUM:
        for (int i = 0; k->names[i]; i++) {
            strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, k->names[i], sizeof list - strlen(list) - 1);
        }
        return rp_error(RP_ERR_ARG, "'%s' must be one of %s; got %s", k->name, list, got);
    case RP_CFG_ROTATE:
        return rp_error(RP_ERR_ARG, "'%s' must be a string of distinct letters of qkvo, got %s",
                        k->name, got);
    case RP_CFG_BOOL:
        return rp_error(RP_ERR_ARG, "'%s' must be true or false, got %s", k->name, got);
    default: return rp_error(RP_ERR_ARG, "'%s' must be an integer, got %s", k->name, got);
    }
}

/* The value of key k (the member at node v) into c. */
static rp_status read_key(const rp_json_doc *doc, size_t v, const rp_cfg_key *k, rp_model_cfg *c)
{
    const rp_json_node *x = &doc->nodes[v];
    if (k->type == RP_CFG_ROTATE) {
        int mask = -1;
        if (x->type == RP_JSON_STRING && strlen(doc->strings + x->str) == x->str_len)
            mask = rp_rotate_from_name(doc->strings + x->str);
        if (mask <= 0) return bad_value(doc, x, k);
        rp_model_cfg_set_int(c, k, mask);
        return RP_OK;
    }
    if (k->type == RP_CFG_BOOL) {
        if (x->type != RP_JSON_TRUE && x->type != RP_JSON_FALSE) return bad_value(doc, x, k);
        rp_model_cfg_set_int(c, k, x->type == RP_JSON_TRUE);
        return RP_OK;
    }
    if (k->type == RP_CFG_ENUM) {
        if (x->type == RP_JSON_STRING)
            for (int i = 0; k->names[i]; i++)
                if (strlen(k->names[i]) == x->str_len &&
                    strcmp(k->names[i], doc->strings + x->str) == 0) {
                    rp_model_cfg_set_int(c, k, i);
                    return RP_OK;
                }
        return bad_value(doc, x, k);
    }
    if (x->type != RP_JSON_NUMBER) return bad_value(doc, x, k);
    rp_status st;
    if (k->type == RP_CFG_NUM) {
        double d = 0.0;
        if ((st = rp_json_double(doc, v, &d)) == RP_OK) rp_model_cfg_set_num(c, k, d);
    } else if (k->type == RP_CFG_SEED) { /* any integer: a negative one as its two's complement */
        uint64_t u = 0;
        int64_t i = 0;
        st = rp_json_u64(doc, v, &u);
        if (st != RP_OK && (st = rp_json_i64(doc, v, &i)) == RP_OK) u = (uint64_t)i;
        if (st == RP_OK) rp_model_cfg_set_int(c, k, (int64_t)u);
    } else {
        int64_t i = 0;
        if ((st = rp_json_i64(doc, v, &i)) == RP_OK) rp_model_cfg_set_int(c, k, i);
    }
    if (st == RP_OK) return RP_OK;
    char why[512];
    snprintf(why, sizeof why, "%s", rp_last_error());
    return rp_error(RP_ERR_ARG, "'%s': %s", k->name, why);
}

/* The keys of the JSON object in text into *c (the others kept); seen[i] set for row i. */
static rp_status read_object(const char *text, size_t len, rp_model_cfg *c, int *seen)
{
    rp_json_doc doc;
    rp_status st = rp_json_parse(&doc, text, len, 4096);
    if (st != RP_OK) {
        rp_json_free(&doc);
        return st;
    }
    if (doc.nodes[0].type != RP_JSON_OBJECT) {
        st = rp_error(RP_ERR_ARG, "not a JSON object (%s)", rp_json_type_name(doc.nodes[0].type));
        goto done;
    }
    for (size_t m = doc.nodes[0].first; m != RP_JSON_NONE; m = doc.nodes[m].next) {
        const char *key = doc.strings + doc.nodes[m].key;
        const rp_cfg_key *k = strlen(key) == doc.nodes[m].key_len
                                  ? rp_model_cfg_key(key, doc.nodes[m].key_len)
                                  : NULL;
        if (!k) {
            char buf[RP_JSON_NAME_TEXT];
            st = rp_error(RP_ERR_ARG, "unknown key '%s'",
                          rp_json_printable(buf, sizeof buf, key, doc.nodes[m].key_len));
            goto done;
        }
        seen[k - rp_model_cfg_keys] = 1;
        if ((st = read_key(&doc, m, k, c)) != RP_OK) goto done;
    }
done:
    rp_json_free(&doc);
    return st;
}

rp_status rp_model_cfg_from_json(const char *text, size_t len, rp_model_cfg *cfg)
{
    if (!cfg || (!text && len))
        return rp_error(RP_ERR_ARG, "rp_model_cfg_from_json: NULL argument");
    rp_model_cfg c = rp_model_cfg_default(0);
    int seen[RP_CFG_MAX_KEYS] = {0};
    RP_TRY(read_object(text, len, &c, seen));
    for (int i = 0; i < rp_model_cfg_nkeys; i++)
        if (rp_model_cfg_keys[i].json == RP_CFG_JSON_REQUIRED && !seen[i])
            return rp_error(RP_ERR_ARG, "no key '%s'", rp_model_cfg_keys[i].name);
    *cfg = c;
    return RP_OK;
}

rp_status rp_model_cfg_keys_from_json(const char *text, size_t len, rp_model_cfg *cfg)
{
    if (!cfg || (!text && len))
        return rp_error(RP_ERR_ARG, "rp_model_cfg_keys_from_json: NULL argument");
    rp_model_cfg c = *cfg;
    int seen[RP_CFG_MAX_KEYS] = {0};
    RP_TRY(read_object(text, len, &c, seen));
    *cfg = c;
    return RP_OK;
}
