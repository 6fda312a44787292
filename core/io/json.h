/* A small strict JSON reader and the string escaping of a writer, for the safetensors header
 * (core/io/safetensors.c) and the model config it carries. Core has no JSON library and the Lua
 * layer's (lua-cjson) reads every number as a double, which cannot hold a 64-bit byte offset or
 * seed exactly; this reader keeps each number's text and converts it on request, exactly.
 *
 * Strict RFC 8259: one value, optionally surrounded by whitespace (space, tab, CR, LF); no
 * comments, trailing commas, NaN/Infinity, leading zeros or single quotes; strings must be valid
 * UTF-8 without raw control characters, escapes are checked (\u surrogates must pair); an object
 * may not repeat a key; nesting is limited to RP_JSON_MAX_DEPTH.
 */
#ifndef RP_JSON_H
#define RP_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "status.h"

#define RP_JSON_MAX_DEPTH 16
#define RP_JSON_NONE ((size_t)UINT32_MAX)
/* Texts longer than this are refused (positions and indices are 32-bit to keep nodes small). */
#define RP_JSON_MAX_TEXT ((size_t)INT32_MAX)

typedef enum {
    RP_JSON_NULL = 0,
    RP_JSON_FALSE,
    RP_JSON_TRUE,
    RP_JSON_NUMBER,
    RP_JSON_STRING,
    RP_JSON_ARRAY,
    RP_JSON_OBJECT
} rp_json_type;

/* One value. Children of an array or object are linked: first, then next (RP_JSON_NONE ends). */
typedef struct rp_json_node {
    rp_json_type type;
    uint32_t pos;     /* byte offset of the value in the text, of its key for a member of an
                         object (for messages) */
    uint32_t key;     /* a member of an object: its key, decoded, at doc->strings + key */
    uint32_t key_len;
    uint32_t str;     /* STRING: the decoded bytes at doc->strings + str; NUMBER: the literal at
                         doc->text + str */
    uint32_t str_len;
    uint32_t first;   /* ARRAY/OBJECT: the first child (RP_JSON_NONE: none) */
    uint32_t next;    /* the next sibling (RP_JSON_NONE: none) */
    uint32_t count;   /* ARRAY/OBJECT: the number of children */
} rp_json_node;

/* A parsed text: nodes[0] is the root. strings holds every decoded string and key, each followed
 * by a NUL (a string may itself contain a NUL from \u0000: use the lengths). The text is not
 * copied: it must outlive the document. */
typedef struct rp_json_doc {
    const char *text;
    rp_json_node *nodes;
    size_t n, cap, max_nodes;
    char *strings;
    size_t slen, scap;
} rp_json_doc;

/* Parses text[0..len-1] (len <= RP_JSON_MAX_TEXT) into *doc (caller frees with rp_json_free, also
 * after a failure). At most max_nodes values (0: no limit), which bounds the memory a forged text
 * can take (36 bytes a value). RP_ERR_ARG "at byte 17: expected ':' after an object key" (bytes
 * counted from 0) for invalid JSON or too many values, RP_ERR_NOMEM when memory runs out. */
rp_status rp_json_parse(rp_json_doc *doc, const char *text, size_t len, size_t max_nodes);
void rp_json_free(rp_json_doc *doc);

/* The member of object node obj whose key is key (NUL-terminated, compared with the decoded key),
 * or RP_JSON_NONE. */
size_t rp_json_get(const rp_json_doc *doc, size_t obj, const char *key);

/* Number conversions, exact or refused (RP_ERR_RANGE with a message naming the literal: "1.5 is
 * not an integer", "-1 is not an integer >= 0", "1e999 is out of range", or "number 99...9... is
 * out of range" for one too long): rp_json_u64 takes an integer literal 0 .. 2^64-1 (no sign,
 * fraction or exponent), rp_json_i64 an integer literal -2^63 .. 2^63-1, rp_json_double any
 * number literal (strtod, correctly rounded; out of range refused). A literal of
 * RP_JSON_INT_LITERAL bytes or more (RP_JSON_NUM_LITERAL for rp_json_double) is out of range,
 * shown by its first RP_JSON_LITERAL_SHOWN bytes. */
#define RP_JSON_INT_LITERAL 64
#define RP_JSON_NUM_LITERAL 512
#define RP_JSON_LITERAL_SHOWN 40
rp_status rp_json_u64(const rp_json_doc *doc, size_t node, uint64_t *v);
rp_status rp_json_i64(const rp_json_doc *doc, size_t node, int64_t *v);
rp_status rp_json_double(const rp_json_doc *doc, size_t node, double *v);

/* The types as messages name them, indexed by rp_json_type: key the type's own name ("null",
 * "false", "true", "number", "string", "array", "object"), name the message's ("a number", ...).
 * The one home of these words: rp_json_type_name reads it. */
typedef struct {
    const char *key, *name;
} rp_json_type_desc;
extern const rp_json_type_desc rp_json_types[RP_JSON_OBJECT + 1];
/* rp_json_types[t].name ("?" for a t out of range). */
const char *rp_json_type_name(rp_json_type t);

/* Writes s[0..len-1] as a JSON string literal (quotes included, '"', '\\' and control
 * characters escaped, other bytes as they are) to f; returns the bytes written, or counts only
 * when f is NULL. */
size_t rp_json_write_string(FILE *f, const char *s, size_t len);

/* The length of the valid UTF-8 sequence at s (of at most n bytes), or 0 when it is not one (or n
 * is 0): overlong forms, surrogates and code points above U+10FFFF are invalid, as in Python's
 * strict decoder. */
size_t rp_json_utf8_len(const void *s, size_t n);

/* Writes s[0..len-1] for a message into buf (size n): printable ASCII as it is, every other byte
 * as \xNN, cut with "..." when longer than RP_JSON_SHOWN bytes; returns buf. The callers' buffers
 * are RP_JSON_NAME_TEXT bytes for a name (a key, a tensor's name) and RP_JSON_VALUE_TEXT for a
 * string value of the config reader's messages (which cuts a long one shorter). */
#define RP_JSON_SHOWN 60
#define RP_JSON_NAME_TEXT 256
#define RP_JSON_VALUE_TEXT 80
const char *rp_json_printable(char *buf, size_t n, const char *s, size_t len);
/* s[0..len-1] as a message shows a string: rp_json_printable into room bytes (at most
 * RP_JSON_NAME_TEXT) in double quotes ("\"name\""), in buf (n bytes, cut to fit); returns buf. */
const char *rp_json_quoted(char *buf, size_t n, const char *s, size_t len, size_t room);

#endif
